"""host/run.py: a node program runs chrooted into the node's root, or not at all; never when it
was found through a process's root; only when only root could have put it there; its output
kept bounded while it runs. Real programs, real chroots (the chroot cases need root)."""

from __future__ import annotations

import os
import shutil

import pytest

from cni_delguard.host import run
from cni_delguard.host.root import NodeRoot
from tests.support.noderoot import needs_root, shell_plugin, with_shell

ENV = {"PATH": "/usr/bin:/bin"}


def program(root, path, args=(), timeout=10.0, limit=run.DEFAULT_LIMIT):
    return run.program(NodeRoot(str(root)), path, list(args), ENV, timeout, limit)


@pytest.fixture
def node(tmp_path):
    """A node root with a shell and a file only that root has."""
    root = with_shell(tmp_path / "node")
    (root / "marker").write_text("inside the node\n")
    return root


def test_a_node_program_runs_chrooted_into_the_node(node):
    shell_plugin(node / "bin/tool", "cat /marker; ls /\n")
    ran = program(node, "/bin/tool")
    assert ran.returncode == 0
    assert ran.stdout.startswith(b"inside the node\n")  # the node's /, not ours
    assert b"tmp" not in ran.stdout.split()  # our /tmp holds the node; the node has none
    assert ran.path == "/bin/tool"


def test_a_link_to_the_program_is_followed_as_the_node_follows_it(node):
    shell_plugin(node / "bin/real-tool", "echo real\n")
    (node / "opt").mkdir()
    (node / "opt/tool").symlink_to("/bin/real-tool")  # absolute: the node's /bin
    ran = program(node, "/opt/tool")
    assert (ran.stdout, ran.path) == (b"real\n", "/bin/real-tool")


def test_a_program_found_through_a_process_is_never_run(node):
    """Whatever the program is: the rule is where it was found."""
    proc_root = node / "proc/42/root"
    (proc_root / "usr/bin").mkdir(parents=True)
    shutil.copy2(node / "bin/busybox", proc_root / "usr/bin/containerd")
    with pytest.raises(run.NotRunError, match="found through a process"):
        run.program(NodeRoot(str(node)).process(42), "/usr/bin/containerd", ["--version"], ENV,
                    10.0)


def test_the_hosts_root_runs_the_hosts_own_program():
    """At `/` the node is the host: "chrooted into /" is the plain exec of its program."""
    ran = run.program(NodeRoot("/"), "/bin/sh", ["-c", "echo $0; exit 3"], ENV, 10.0)
    assert (ran.returncode, ran.stdout) == (3, b"/bin/sh\n")


@pytest.mark.parametrize(
    ("change", "why"),
    [
        pytest.param(lambda p: p.chmod(0o775), "writable by group or others", id="group-writable"),
        pytest.param(lambda p: p.chmod(0o757), "writable by group or others", id="world-writable"),
        pytest.param(lambda p: p.parent.chmod(0o777), "writable by group or others",
                     id="its-dir-world-writable"),
        pytest.param(lambda p: os.chown(p, 4242, 4242), "owned by uid 4242", id="another-owner"),
        pytest.param(lambda p: p.chmod(0o644), "not executable", id="not-executable"),
    ],
)
def test_a_program_someone_else_could_have_written_is_not_run(node, change, why):
    (node / "opt/bin").mkdir(parents=True)
    tool = shell_plugin(node / "opt/bin/tool", "echo ran\n")
    change(tool)
    with pytest.raises(run.NotRunError, match=why):
        program(node, "/opt/bin/tool")


def test_a_sticky_dir_above_the_program_is_fine(node):
    """/tmp is world-writable and sticky: others may add names there, not replace ours."""
    (node / "tmp").mkdir(mode=0o1777)
    (node / "tmp").chmod(0o1777)
    (node / "tmp/mine").mkdir()
    shell_plugin(node / "tmp/mine/tool", "echo ran\n")
    assert program(node, "/tmp/mine/tool").stdout == b"ran\n"


def test_output_is_kept_bounded_while_it_runs():
    """10 MB printed; 64 KiB kept of it, the rest read and dropped (never held at once)."""
    ran = run.program(NodeRoot("/"), "/usr/bin/head", ["-c", "10000000", "/dev/zero"], ENV, 30.0)
    assert ran.returncode == 0
    assert len(ran.stdout) == run.DEFAULT_LIMIT and ran.cut


def test_stderr_is_kept_apart_and_bounded_too():
    ran = run.program(NodeRoot("/"), "/bin/sh", ["-c", "echo out; head -c 5000 /dev/zero >&2"],
                      ENV, 30.0, limit=100)
    assert (ran.stdout, len(ran.stderr), ran.cut) == (b"out\n", 100, True)


def test_a_program_past_its_timeout_is_killed():
    with pytest.raises(run.TimedOutError, match=r"did not finish within 0\.2 s"):
        run.program(NodeRoot("/"), "/bin/sleep", ["60"], ENV, 0.2)


def test_exit_125_is_the_programs_own(node):
    """The root not entered never looks like an exit status: 125 is what the program said."""
    shell_plugin(node / "bin/tool", "echo cannot chroot into nothing >&2; exit 125\n")
    ran = program(node, "/bin/tool")
    assert ran.returncode == 125


def test_a_root_that_cannot_be_entered_says_so(node, monkeypatch):
    """The chroot fails in the child (no CAP_SYS_CHROOT): NotRunError, never an exit status."""
    shell_plugin(node / "bin/tool", "echo ran\n")

    def refused(path):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "chroot", refused)
    with pytest.raises(run.NotRunError, match=r"cannot chroot into .*CAP_SYS_CHROOT"):
        program(node, "/bin/tool")


def test_a_missing_interpreter_is_said_in_the_nodes_terms(tmp_path):
    needs_root()
    root = tmp_path / "bare"
    (root / "bin").mkdir(parents=True)
    shell_plugin(root / "bin/tool", "echo ran\n")  # #!/bin/sh: the bare root has no shell
    with pytest.raises(run.NotRunError, match="interpreter `#!/bin/sh` is missing there"):
        program(root, "/bin/tool")


def test_a_missing_program_is_not_run(node):
    with pytest.raises(run.NotRunError, match="No such file"):
        program(node, "/bin/none")
