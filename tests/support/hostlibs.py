"""Host libraries the frozen bundle must never load, built here from tests/fakes/hostlibs/.

- `newer_glibc`: a library that needs GLIBC_2.38 (what a preload built on Debian trixie or
  Ubuntu 24.04 needs): no glibc 2.36 loader can load it. How the version need is made honestly
  is in tests/fakes/hostlibs/newer_glibc.c (a link-time stub libc.so.6 defining the symbol at
  that version); `needs()` reads it back from the ELF file, so a build that lost it fails.
- `marker`: a harmless library whose constructor appends "<pid> <comm>" to a file: which process
  loaded it. `marks` is that file's path compiled in (a library in a host lib dir, found by name,
  is given no environment); empty, the path comes from $DGBN_MARKS at run time.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

SOURCES = Path(__file__).resolve().parents[1] / "fakes" / "hostlibs"
CFLAGS = ["-shared", "-fPIC", "-O2", "-Wall", "-Werror"]


def _cc(*args: str) -> None:
    subprocess.run(["gcc", *args], check=True, capture_output=True, timeout=120)


def newer_glibc(out_dir: Path) -> Path:
    """libdgbn-newer.so, needing GLIBC_2.38 from libc.so.6."""
    stub_dir = out_dir / "stub"
    stub_dir.mkdir(parents=True, exist_ok=True)
    stub = stub_dir / "libc.so.6"
    _cc(*CFLAGS, "-nostdlib", "-Wl,-soname,libc.so.6",
        f"-Wl,--version-script={SOURCES / 'stub_libc.map'}", "-o", str(stub),
        str(SOURCES / "stub_libc.c"))
    lib = out_dir / "libdgbn-newer.so"
    _cc(*CFLAGS, "-nostdlib", "-o", str(lib), str(SOURCES / "newer_glibc.c"), str(stub))
    assert "GLIBC_2.38" in needs(lib), needs(lib)
    return lib


def marker(out_dir: Path, name: str = "libdgbn-marker.so", marks: str = "",
           soname: str | None = None) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = out_dir / name
    extra = [f"-Wl,-soname,{soname}"] if soname else []
    _cc(*CFLAGS, *extra, f'-DMARKS="{marks}"', "-o", str(lib), str(SOURCES / "marker.c"))
    return lib


def needs(lib: Path) -> set[str]:
    """The symbol versions `lib` needs (readelf's version-needs section)."""
    text = subprocess.run(["readelf", "--version-info", "--wide", str(lib)], check=True,
                          capture_output=True, text=True).stdout
    return set(re.findall(r"Name: (GLIBC_[0-9.]+)", text))


def marks(path: Path) -> list[tuple[int, str]]:
    """(pid, comm) of every process that loaded a marker library writing to `path`."""
    if not path.exists():
        return []
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        pid, _, comm = line.partition(" ")
        found.append((int(pid), comm))
    return found
