"""tools/release/reprotar.py: tarballs that depend on their contents only, and the name of the
first file in which two artifacts differ."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import time

import pytest

from tools.release import reprotar
from tools.release.reprotar import Entry

EPOCH = 1_700_000_000


def make_tree(root, stamp: float):
    (root / "_internal").mkdir(parents=True)
    (root / "cni-delguard").write_bytes(b"\x7fELF launcher")
    (root / "cni-delguard").chmod(0o755)
    (root / "_internal" / "lib.so").write_bytes(b"library")
    (root / "link").symlink_to("cni-delguard")
    for p in (root / "cni-delguard", root / "_internal" / "lib.so", root / "_internal", root):
        os.utime(p, (stamp, stamp))
    return root


def test_two_packings_of_one_tree_at_different_times_are_the_same_bytes(tmp_path):
    a = make_tree(tmp_path / "a", time.time())
    b = make_tree(tmp_path / "b", 12345)
    pack = [reprotar.gzipped(reprotar.tar_bytes(reprotar.tree(t, "cni-delguard"), EPOCH))
            for t in (a, b)]
    assert pack[0] == pack[1]
    with tarfile.open(fileobj=io.BytesIO(pack[0])) as tar:
        infos = tar.getmembers()
    assert [i.name for i in infos] == sorted(i.name for i in infos)
    assert {(i.mtime, i.uid, i.gid, i.uname, i.gname) for i in infos} == {(EPOCH, 0, 0, "", "")}
    modes = {i.name: (i.type, i.mode) for i in infos}
    assert modes["cni-delguard/cni-delguard"] == (tarfile.REGTYPE, 0o755)
    assert modes["cni-delguard/link"][0] == tarfile.SYMTYPE
    # gzip's header: no time (bytes 4..8) and no file name (flag FNAME unset).
    assert pack[0][4:8] == b"\0\0\0\0"
    assert pack[0][3] & 0x08 == 0


def test_normalize_keeps_names_modes_and_contents_and_drops_the_packing_time():
    def packed(mtime: int) -> bytes:
        buf = io.BytesIO()
        with gzip.GzipFile(fileobj=buf, mode="wb", mtime=mtime) as gz, \
                tarfile.open(fileobj=gz, mode="w") as tar:
            for name, data in (("chart/values.yaml", b"a: 1\n"), ("chart/Chart.yaml", b"n\n")):
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime, info.uid = len(data), 0o644, mtime, 1000
                tar.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    first, second = packed(1), packed(2)
    assert first != second
    assert reprotar.normalize(first, EPOCH) == reprotar.normalize(second, EPOCH)
    repacked = reprotar.members(reprotar.normalize(first, EPOCH))
    assert [(m.name, m.mode, m.data) for m in repacked] == [
        ("chart/Chart.yaml", 0o644, b"n\n"), ("chart/values.yaml", 0o644, b"a: 1\n")]


def tgz(*entries: Entry, epoch: int = EPOCH) -> bytes:
    return reprotar.gzipped(reprotar.tar_bytes(entries, epoch))


@pytest.mark.parametrize(("a", "b", "found"), [
    pytest.param({"x": b"1"}, {"x": b"1"}, None, id="same"),
    pytest.param({"x": b"1", "y": b"2"}, {"x": b"1", "y": b"3"}, "y", id="plain-file"),
    pytest.param({"x": b"1"}, {"x": b"1", "w": b"2"}, "w (only in the second)", id="extra-file"),
    pytest.param({"img.tar": tgz(Entry("a", 0o644, b"1"), Entry("b", 0o644, b"2"))},
                 {"img.tar": tgz(Entry("a", 0o644, b"1"), Entry("b", 0o644, b"X"))},
                 "img.tar!b", id="member-of-a-tarball"),
    pytest.param({"o.tar": tgz(Entry("layer", 0o644, tgz(Entry("usr/bin/x", 0o755, b"1"))))},
                 {"o.tar": tgz(Entry("layer", 0o644, tgz(Entry("usr/bin/x", 0o755, b"2"))))},
                 "o.tar!layer!usr/bin/x", id="tarball-in-a-tarball"),
    pytest.param({"t.tgz": tgz(Entry("a", 0o644, b"1"))},
                 {"t.tgz": tgz(Entry("a", 0o644, b"1"), epoch=EPOCH + 1)},
                 "t.tgz (member headers)", id="only-the-times"),
])
def test_first_difference_names_the_first_differing_file(a, b, found):
    assert reprotar.first_difference(a, b) == found


def test_first_difference_of_two_release_dirs(tmp_path):
    for side, text in (("a", b"1"), ("b", b"2")):
        (tmp_path / side).mkdir()
        (tmp_path / side / "SHA256SUMS").write_bytes(b"same")
        (tmp_path / side / "x.digest").write_bytes(text)
    assert reprotar.first_difference_of_paths(tmp_path / "a", tmp_path / "b") == "x.digest"
