"""Make PyInstaller's one-folder bundle need nothing from the host's userland.

    python packaging/selfcontain.py BUNDLE-DIR

A runtime execs a CNI plugin with the host's own loader and C library. PyInstaller leaves glibc
(and the loader) to the host, and the bundle then needs the glibc it was built against: on a host
with an older one (Amazon Linux 2023, RHEL 8/9, Ubuntu 20.04, Debian 11) or none at all (Talos,
Alpine) every ADD and DEL would fail. So, after PyInstaller:

1. its executable becomes `cni-delguard.frozen` and `cni-delguard` is the static launcher
   (packaging/launcher/launcher.c, compiled here for the loader named in the bootloader's own
   PT_INTERP), which starts it with the bundle's loader and library path;
2. that loader, and every library any ELF file of the bundle needs that PyInstaller left out
   (libc, libm, libpthread, libdl, librt, libutil ...), are copied into `_internal/` from this
   build root, until the closure is complete: the bundle's loader, asked to list each ELF file's
   dependencies with `--inhibit-cache --library-path _internal`, resolves every one inside the
   bundle;
3. every ELF file is checked to be of one machine (no stray file of another arch);
4. the bundle's loader is sealed: its compiled-in host paths are rewritten in place, each to a
   path of the same length under a kernel filesystem that can hold no library (below /dev/null,
   a device, or /sys), so it reads no /etc/ld.so.preload and no /etc/ld.so.cache and searches no
   host lib dir: `--library-path _internal` is the only place a library can come from (see
   SEALED and packaging/README.md, "Preloads and the host's lib dirs");
5. `_internal/delguard-build.json` says what was built: the arch (from that machine), the build
   Python's version and the glibc copied in (read by cni_delguard/buildinfo.py: `--version`, and
   the manifest of a version the installer puts on a node).

Needs a C compiler with a static libc (Debian: gcc, libc6-dev; CC overrides) and binutils'
readelf, both of the build root's arch. Deterministic: the same build root gives the same bytes.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

LAUNCHER_SOURCE = Path(__file__).resolve().parent / "launcher" / "launcher.c"
EXECUTABLE = "cni-delguard"
FROZEN = "cni-delguard.frozen"  # launcher.c's PROGRAM
LIBDIR = "_internal"  # launcher.c's LIBDIR and PyInstaller's contents directory
ELF_MAGIC = b"\x7fELF"
_LISTED = re.compile(r"^\s*(\S+) => (.+?)(?: \(0x[0-9a-f]+\))?$")
# readelf's name of a machine, as Debian, Kubernetes and OCI images name the arch.
ARCH_OF_MACHINE = {"Advanced Micro Devices X86-64": "amd64", "AArch64": "arm64"}
BUILD_INFO = "delguard-build.json"  # cni_delguard/buildinfo.py's FILE


# glibc's loader (2.36) has these paths compiled in, at offsets and lengths fixed in its code (the
# lengths are folded into it: a string cannot grow or shrink, and `_dl_init_paths` asserts that a
# system dir starts with '/'). Each is replaced by a path of the same length that no host can
# hold a file at: below /dev/null (a character device: ENOTDIR) or in /sys (sysfs: only the kernel
# makes entries there, and none is a library). The system dirs appear twice in the loader.
_NOWHERE = b"/dev/null/"
_SYSFS_OF_LENGTH = {5: b"/sys/", 9: b"/sys/dev/"}
HOST_FILES = (b"/etc/ld.so.preload", b"/etc/ld.so.cache")
SYSTEM_DIRS = {
    "x86_64": (b"/lib/x86_64-linux-gnu/", b"/usr/lib/x86_64-linux-gnu/", b"/lib/", b"/usr/lib/"),
    "aarch64": (b"/lib/aarch64-linux-gnu/", b"/usr/lib/aarch64-linux-gnu/", b"/lib/", b"/usr/lib/"),
}


class SelfContainError(Exception):
    pass


def nowhere(path: bytes) -> bytes:
    """A path as long as `path` (a dir when it ends in '/') where no host can hold a file."""
    size, is_dir = len(path), path.endswith(b"/")
    if size in _SYSFS_OF_LENGTH and is_dir:
        return _SYSFS_OF_LENGTH[size]
    filler = size - len(_NOWHERE) - int(is_dir)
    if filler < 1:
        raise SelfContainError(f"no sealed path of {size} bytes for {path!r}: review SYSTEM_DIRS")
    return _NOWHERE + (b"delguard-" * size)[:filler] + (b"/" if is_dir else b"")


def seal(loader: Path, machine_name: str) -> list[str]:
    """Rewrite the loader's host paths (SYSTEM_DIRS, HOST_FILES) in place; what was sealed."""
    dirs = SYSTEM_DIRS.get(machine_name)
    if dirs is None:
        raise SelfContainError(f"no system dirs known for {machine_name}: review SYSTEM_DIRS")
    data = bytearray(loader.read_bytes())
    blob = b"".join(d + b"\0" for d in dirs)
    sealed_blob = b"".join(nowhere(d) + b"\0" for d in dirs)
    if data.count(blob) not in (1, 2):
        raise SelfContainError(f"{loader}: its system dirs {dirs} are not as in glibc 2.36")
    data = data.replace(blob, sealed_blob)
    for path in HOST_FILES:
        if data.count(path + b"\0") != 1:
            raise SelfContainError(f"{loader}: {path!r} is not there exactly once")
        data = data.replace(path + b"\0", nowhere(path) + b"\0")
    loader.write_bytes(bytes(data))
    return [d.decode() for d in (*dirs, *HOST_FILES)]


def check_sealed(loader: Path, bundle: Path) -> None:
    """The sealed loader, given an empty library path, finds none of the bootloader's libraries
    (this build root has every one of them in its own lib dirs)."""
    empty = bundle / "build-empty-libdir"
    empty.mkdir()
    try:
        r = subprocess.run(
            [str(loader), "--inhibit-cache", "--library-path", str(empty), "--list",
             str(bundle / FROZEN)],
            capture_output=True, text=True, check=False,
        )
    finally:
        empty.rmdir()
    found = [line for line in r.stdout.splitlines() if "=>" in line and "not found" not in line]
    said = r.stdout + r.stderr
    if r.returncode == 0 or found or not ("not found" in said or "cannot open shared" in said):
        raise SelfContainError(f"the sealed loader still finds libraries outside the bundle: "
                               f"{found or r.stdout or r.stderr}")


def readelf(*args: str) -> str:
    return subprocess.run(
        ["readelf", "--wide", *args], capture_output=True, text=True, check=True
    ).stdout


def interpreter(path: Path) -> str:
    """The PT_INTERP of a dynamic executable, e.g. /lib64/ld-linux-x86-64.so.2."""
    found = re.search(r"Requesting program interpreter: (\S+)\]", readelf("-l", str(path)))
    if not found:
        raise SelfContainError(f"{path} names no program interpreter")
    return found.group(1)


def machine(path: Path) -> str:
    found = re.search(r"^\s*Machine:\s+(.+)$", readelf("-h", str(path)), re.MULTILINE)
    if not found:
        raise SelfContainError(f"readelf found no machine in {path}")
    return found.group(1).strip()


def elf_files(root: Path) -> list[Path]:
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as f:
                if f.read(4) == ELF_MAGIC:
                    found.append(path)
    return found


def compile_launcher(loader: str, out: Path) -> None:
    cc = os.environ.get("CC", "gcc")
    subprocess.run(
        [cc, "-static", "-Os", "-Wall", "-Wextra", "-Werror", f'-DDELGUARD_LOADER="{loader}"',
         "-o", str(out), str(LAUNCHER_SOURCE)],
        check=True,
    )
    subprocess.run(["strip", str(out)], check=True)
    if "Requesting program interpreter" in readelf("-l", str(out)):
        raise SelfContainError(f"{out} is not static: {cc} linked it dynamically")


def dependencies(loader: Path, libdir: Path, path: Path) -> dict[str, str]:
    """What `path` needs and where the bundle's loader finds it, host cache ignored."""
    r = subprocess.run(
        [str(loader), "--inhibit-cache", "--library-path", str(libdir), "--list", str(path)],
        capture_output=True, text=True, check=False,
    )
    if r.returncode != 0:
        raise SelfContainError(f"{loader} --list {path} failed: {r.stderr.strip() or r.stdout}")
    found = {}
    for line in r.stdout.splitlines():
        m = _LISTED.match(line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


def complete(bundle: Path, loader: Path) -> list[str]:
    """Copy into _internal every library some ELF file resolves outside it; until none does."""
    libdir = bundle / LIBDIR
    added: list[str] = []
    while True:
        outside = {}
        for path in elf_files(bundle):
            if path.name in (EXECUTABLE, loader.name):
                continue
            for name, where in dependencies(loader, libdir, path).items():
                if where == "not found":
                    raise SelfContainError(f"{path.relative_to(bundle)} needs {name}: not found")
                if Path(where).parent != libdir:
                    outside[name] = where
        if not outside:
            return added
        for name, where in sorted(outside.items()):
            shutil.copyfile(where, libdir / name)
            os.chmod(libdir / name, 0o755)  # noqa: S103 - a library, as in /usr/lib
            added.append(name)


def selfcontain(bundle: Path) -> None:
    exe, frozen = bundle / EXECUTABLE, bundle / FROZEN
    if frozen.exists():
        raise SelfContainError(f"{bundle} is already self-contained")
    interp = interpreter(exe)
    loader = bundle / LIBDIR / Path(interp).name
    exe.rename(frozen)
    compile_launcher(loader.name, exe)
    shutil.copyfile(os.path.realpath(interp), loader)
    os.chmod(loader, 0o755)  # noqa: S103 - the loader is run, as /lib64's is
    added = complete(bundle, loader)
    sealed = seal(loader, platform.machine())
    check_sealed(loader, bundle)
    machines = {machine(p) for p in elf_files(bundle)}
    if len(machines) != 1:
        raise SelfContainError(f"{bundle} holds ELF files of several machines: {sorted(machines)}")
    (found,) = machines
    if found not in ARCH_OF_MACHINE:
        raise SelfContainError(f"{bundle} is for {found}, an arch this project does not build")
    info = {
        "arch": ARCH_OF_MACHINE[found],
        "python": platform.python_version(),  # the build Python: the one frozen in
        "glibc": os.confstr("CS_GNU_LIBC_VERSION"),  # the build root's: the one copied in
    }
    (bundle / LIBDIR / BUILD_INFO).write_text(json.dumps(info, sort_keys=True) + "\n")
    print(f"selfcontain: launcher for {loader.name}; added {', '.join([loader.name, *added])}; "
          f"sealed {', '.join(sealed)}; every ELF file is {found}; {info}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    try:
        selfcontain(Path(sys.argv[1]).resolve())
    except (SelfContainError, subprocess.CalledProcessError, OSError) as exc:
        raise SystemExit(f"selfcontain: {exc}") from None
