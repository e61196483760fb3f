"""Run a program with system calls made to fail: `seccomp_deny.py NR[,NR...] ERRNO -- ARGV...`.

A seccomp filter (installed with prctl, inherited across exec by the program and its children)
answers each system call number NR with ERRNO and allows every other one. This is how the tests
make pidfd_open fail for the guard without any test hook in the product: the kernel itself refuses
the call, as it would on a kernel without pidfd_open (ENOSYS) or a process out of descriptors
(EMFILE). x86_64 and aarch64 only (the architectures this project builds for).
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_RET_K = 0x06
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# The same numbers on both (system calls added since 5.1 are numbered alike on every arch), and
# what a kernel before 5.3 (pidfd_open, clone3) or 5.9 (close_range) answers them with: ENOSYS.
PIDFD_OPEN, CLONE3, CLOSE_RANGE = 434, 435, 436


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def deny(numbers: list[int], err: int) -> None:
    arch = AUDIT_ARCH[platform.machine()]
    checks = len(numbers)
    program = b"".join(
        [
            _insn(BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
            _insn(BPF_JEQ_K, 0, checks + 1, arch),  # another arch: allow
            _insn(BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
            # the i-th comparison jumps over the ones after it and ALLOW, to the ERRNO return
            *(_insn(BPF_JEQ_K, checks - i + 1, 0, nr) for i, nr in enumerate(numbers, 1)),
            _insn(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
            _insn(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | err),
        ]
    )
    buf = ctypes.create_string_buffer(program)

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Fprog(len(program) // 8, ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong,
                           ctypes.c_ulong]
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_SECCOMP")


def main(argv: list[str]) -> None:
    numbers, err, sep, *command = argv
    assert sep == "--" and command, __doc__
    deny([int(nr) for nr in numbers.split(",")], int(err))
    os.execv(command[0], command)  # noqa: S606 - exec of the program under test, no shell


if __name__ == "__main__":
    main(sys.argv[1:])
