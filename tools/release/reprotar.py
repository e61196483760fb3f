"""Tarballs that depend on their contents only: entries sorted by name, every mtime the
release's SOURCE_DATE_EPOCH, owner and group 0 with no names, permission bits kept, hard links
stored as files, and a gzip header with no time and no file name (gzip's own timestamp is the
usual reason two packings of one tree differ). Also the comparison that names the first file in
which two release artifacts differ, looking inside tarballs (and tarballs in tarballs: an OCI
archive's layers)."""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Entry:
    """One member: a dir (data None, link None), a file (data) or a symlink (link)."""

    name: str
    mode: int
    data: bytes | None = None
    link: str | None = None


def tree(src: Path, prefix: str) -> Iterator[Entry]:
    """The entries of the dir `src` under `prefix` (itself included), never following a link."""
    yield Entry(prefix, stat.S_IMODE(os.lstat(src).st_mode))
    for path in sorted(src.rglob("*"), key=lambda p: p.relative_to(src).as_posix()):
        st = os.lstat(path)
        name = f"{prefix}/{path.relative_to(src).as_posix()}"
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISLNK(st.st_mode):
            yield Entry(name, 0o777, link=os.readlink(path))
        elif stat.S_ISDIR(st.st_mode):
            yield Entry(name, mode)
        elif stat.S_ISREG(st.st_mode):
            yield Entry(name, mode, data=path.read_bytes())
        else:
            raise ValueError(f"{path}: neither a file, a dir nor a symlink")


def tar_bytes(entries: Iterable[Entry], epoch: int) -> bytes:
    """An uncompressed tar of `entries`, sorted by name."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for e in sorted(entries, key=lambda e: e.name):
            info = tarfile.TarInfo(e.name)
            info.mode, info.mtime = e.mode, epoch
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if e.link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, e.link
                tar.addfile(info)
            elif e.data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(e.data)
                tar.addfile(info, io.BytesIO(e.data))
    return buf.getvalue()


def gzipped(data: bytes) -> bytes:
    """gzip with no timestamp and no name in its header (level 9, this Python's zlib)."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as gz:
        gz.write(data)
    return buf.getvalue()


def members(data: bytes) -> list[Entry]:
    """The entries of a tar (gzipped or not) given as bytes."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    found = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for info in tar:
            if info.issym():
                found.append(Entry(info.name, info.mode, link=info.linkname))
            elif info.isdir():
                found.append(Entry(info.name, info.mode))
            elif info.isfile():
                extracted = tar.extractfile(info)
                data = extracted.read() if extracted else b""
                found.append(Entry(info.name, info.mode, data=data))
            else:
                raise ValueError(f"{info.name}: neither a file, a dir nor a symlink")
    return found


def normalize(data: bytes, epoch: int) -> bytes:
    """A gzipped tar (a chart `helm package` wrote, which stamps each entry with the time of the
    packing) repacked with the same names, modes and contents, deterministically."""
    return gzipped(tar_bytes(members(data), epoch))


def _is_tar(data: bytes) -> bool:
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError):
            return False
    return len(data) > 262 and data[257:262] == b"ustar"


def _walk(path: Path) -> dict[str, bytes]:
    if path.is_dir():
        return {p.relative_to(path).as_posix(): p.read_bytes()
                for p in sorted(path.rglob("*")) if p.is_file() and not p.is_symlink()}
    return {path.name: path.read_bytes()}


def _as_tree(data: bytes) -> dict[str, bytes]:
    """A tarball's members by name (a symlink as its target, a dir as its mode)."""
    return {m.name: m.data if m.data is not None else (m.link or oct(m.mode)).encode()
            for m in members(data)}


def _first_in_bytes(a: bytes, b: bytes, where: str) -> str | None:
    if a == b:
        return None
    if not (_is_tar(a) and _is_tar(b)):
        return where or "(the bytes)"
    found = first_difference(_as_tree(a), _as_tree(b), f"{where}!" if where else "")
    # Same members, same bytes: the difference is in the tar's own headers (times, owners).
    return found or f"{where or '(the archive)'} (member headers)"


def first_difference(a: dict[str, bytes], b: dict[str, bytes], where: str = "") -> str | None:
    """The first name (in sorted order) whose bytes differ between two trees (name -> bytes),
    a tarball's members looked into (`outer.tar!member`); None when they are the same."""
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            return f"{where}{name} (only in {'the second' if name not in a else 'the first'})"
        found = _first_in_bytes(a[name], b[name], f"{where}{name}")
        if found:
            return found
    return None


def first_difference_of_paths(a: Path, b: Path) -> str | None:
    """first_difference of two files or two dirs on disk."""
    return first_difference(_walk(a), _walk(b))
