"""The steps of tools/release.sh that write a file of the release, one subcommand each:
`python3 -m tools.release STEP --help`. Each writes its output whole or not at all (a temp
file renamed), so a failed release never leaves a half-written artifact behind."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from tools.release import oci, provenance, reprotar, sbom


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.chmod(tmp, 0o644)
    tmp.replace(path)


def _release(args: argparse.Namespace) -> oci.Release:
    return oci.Release(args.version, args.revision, args.source, args.epoch)


def _pairs(values: list[str]) -> dict[str, Path]:
    return {k: Path(v) for k, v in (item.split("=", 1) for item in values)}


def cmd_tar(args: argparse.Namespace) -> int:
    entries = reprotar.tree(Path(args.src), args.prefix)
    _write(Path(args.out), reprotar.gzipped(reprotar.tar_bytes(entries, args.epoch)))
    return 0


def cmd_normalize(args: argparse.Namespace) -> int:
    path = Path(args.file)
    _write(path, reprotar.normalize(path.read_bytes(), args.epoch))
    return 0


def cmd_sbom(args: argparse.Namespace) -> int:
    status = Path(args.status).read_text(encoding="utf-8")
    _write(Path(args.out), sbom.sbom(args.arch, status, Path(args.bundle), _release(args)))
    return 0


def cmd_image(args: argparse.Namespace) -> int:
    release = _release(args)
    bundles, sboms = _pairs(args.bundle), _pairs(args.sbom)
    layers = {arch: reprotar.tar_bytes(oci.rootfs(bundles[arch], sboms[arch].read_bytes()),
                                       release.epoch) for arch in sorted(bundles)}
    digest, blobs = oci.index(layers, release)
    _write(Path(args.out), oci.archive(digest, blobs, release))
    print(digest)  # the one output: release.sh reads the digest
    return 0


def cmd_set_image(args: argparse.Namespace) -> int:
    """The chart's default image: `repository` and `digest` of values.yaml's top-level `image:`
    block, edited as text (its comments stay; a YAML round trip would drop them)."""
    path = Path(args.values)
    text = path.read_text(encoding="utf-8")
    block = re.search(r"^image:\n((?:[ #].*\n|\n)*)", text, re.MULTILINE)
    if not block:
        sys.stderr.write(f"{path}: no top-level image: block\n")
        return 1
    body = block.group(1)
    for key, value in (("repository", args.repository), ("digest", args.digest)):
        body, n = re.subn(rf'^(  {key}:) .*$', rf'\1 "{value}"', body, count=1, flags=re.MULTILINE)
        if n != 1:
            sys.stderr.write(f"{path}: image.{key} not found\n")
            return 1
    _write(path, (text[: block.start(1)] + body + text[block.end(1):]).encode())
    return 0


def cmd_provenance(args: argparse.Namespace) -> int:
    sums = {}
    for line in Path(args.sums).read_text(encoding="utf-8").splitlines():
        sha, name = line.split(maxsplit=1)
        sums[name.lstrip("*")] = sha
    data = provenance.predicate(_release(args), shlex.split(args.command), args.builder, sums)
    _write(Path(args.out), data)
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    found = reprotar.first_difference_of_paths(Path(args.a), Path(args.b))
    if found:
        print(f"first difference: {found}")
        return 1
    return 0


def _release_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--version", required=True)
    p.add_argument("--revision", required=True, help="the source commit")
    p.add_argument("--source", required=True, help="the source repository's URL (the home)")
    p.add_argument("--epoch", required=True, type=int, help="SOURCE_DATE_EPOCH")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python3 -m tools.release")
    steps = top.add_subparsers(dest="step", required=True)
    commands: dict[str, Callable[[argparse.Namespace], int]] = {}

    def step(name: str, func: Callable[[argparse.Namespace], int],
             help_text: str) -> argparse.ArgumentParser:
        commands[name] = func
        p = steps.add_parser(name, help=help_text)
        p.set_defaults(func=func)
        return p

    p = step("tar", cmd_tar, "a dir as a deterministic .tar.gz")
    p.add_argument("--prefix", required=True)
    p.add_argument("--epoch", required=True, type=int)
    p.add_argument("src")
    p.add_argument("out")
    p = step("normalize", cmd_normalize, "repack a .tgz deterministically, in place")
    p.add_argument("--epoch", required=True, type=int)
    p.add_argument("file")
    p = step("sbom", cmd_sbom, "one arch's SBOM (CycloneDX JSON)")
    _release_args(p)
    p.add_argument("--arch", required=True)
    p.add_argument("--status", required=True, help="the base's dpkg status file")
    p.add_argument("--bundle", required=True)
    p.add_argument("out")
    p = step("image", cmd_image, "the multi-arch OCI archive; prints its digest")
    _release_args(p)
    p.add_argument("--bundle", action="append", required=True, metavar="ARCH=DIR")
    p.add_argument("--sbom", action="append", required=True, metavar="ARCH=FILE")
    p.add_argument("out")
    p = step("set-image", cmd_set_image, "the chart's default image (values.yaml)")
    p.add_argument("--repository", required=True)
    p.add_argument("--digest", required=True)
    p.add_argument("values")
    p = step("provenance", cmd_provenance, "the SLSA provenance predicate")
    _release_args(p)
    p.add_argument("--builder", required=True)
    p.add_argument("--sums", required=True)
    p.add_argument("--command", required=True, help="the release's command line, shell-quoted")
    p.add_argument("out")
    p = step("diff", cmd_diff, "name the first file in which two artifacts (or dirs) differ")
    p.add_argument("a")
    p.add_argument("b")
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
