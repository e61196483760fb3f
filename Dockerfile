# The cni-delguard installer image: the frozen one-folder bundle and nothing else.
# Its entrypoint is the binary; by default it runs the long-running installer on a node mounted
# at /host (`install --watch --root /host`); installer/daemonset.yaml passes the same arguments.
# `uninstall --root /host` and `ready --root /host` are the other commands a node needs.
#
# Build with tools/build-image.sh (buildah, no registry needed; amd64 and arm64 and one manifest
# list naming both), or any builder, for any platform it can run:
#   buildah bud --platform linux/arm64 --build-arg BASE=<a Debian bookworm image> -t cni-delguard .
# BASE is the build stage's image, by digest (issue 38: a tag moves): the digest below is one of
# debian:bookworm seen pinned in public Dockerfiles, not pulled here (no registry is reachable from
# this project's build machine: tools/build-image.sh builds FROM its own debootstrap base, named
# by its image ID); check it (`skopeo inspect docker://docker.io/library/debian:bookworm`) before
# relying on it. RUNTIME is the final image (scratch: the bundle, which carries its own loader and
# C library, and an empty /tmp; pass RUNTIME=<BASE> for an image with a shell).
ARG BASE=docker.io/library/debian:bookworm@sha256:8a8cd02c5912770b4980228a54d4aff9e4f986f1eb2525d2d371dec5232cefcc
ARG RUNTIME=scratch

FROM ${BASE} AS build
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8
# libpython3.11: PyInstaller bundles the shared libpython; binutils: strip, readelf; gcc and
# libc6-dev: the bundle's static launcher (packaging/selfcontain.py). Each at an exact version
# (issue 38): bookworm's when this was written; tools/build-image.sh passes the versions its base
# holds (so the install changes nothing there). A version the archive no longer has fails the
# build: pass APT_PINS with the current ones (`apt-cache policy PACKAGE`), knowingly.
ARG APT_PINS="python3=3.11.2-1+b1 python3.11=3.11.2-6+deb12u9 python3.11-venv=3.11.2-6+deb12u9 libpython3.11=3.11.2-6+deb12u9 binutils=2.40-2 gcc=4:12.2.0-3 libc6-dev=2.36-9+deb12u14"
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends --allow-downgrades ${APT_PINS} \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# The pins first, in a layer of their own: a change to the sources does not download them again.
COPY pyproject.toml ./
COPY packaging/requirements.txt packaging/
COPY tools/build.sh tools/
RUN python3 -m venv /venv && PYTHON=/venv/bin/python tools/build.sh --pins-only
COPY packaging packaging/
COPY LICENSE ./
COPY cni_delguard cni_delguard/
COPY installer/smoke-test.sh installer/
# The project's build, with this stage's Debian python3.11 as the build root (tools/build.sh
# --here): the pins of packaging/requirements.txt, by sha256, PyInstaller, its own loader and C
# library, the smoke test. SOURCE_DATE_EPOCH (tools/build-image.sh passes the commit's time) makes
# it the same bundle as tools/build.sh's.
ARG SOURCE_DATE_EPOCH=0
RUN SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH} PYTHON=/venv/bin/python tools/build.sh --here
# The installer itself, from the bundle: install into a fake node, uninstall, byte-identical.
RUN installer/smoke-test.sh /src/dist/cni-delguard/cni-delguard
# The final image's filesystem: the bundle, run there with nothing else to prove it needs nothing.
COPY installer/stage-rootfs.sh installer/
RUN installer/stage-rootfs.sh /src/dist/cni-delguard /rootfs
# The SBOM (CycloneDX JSON), by the release's own code (tools/release/sbom.py, as
# tools/release.sh writes it): every Debian package this stage's dpkg status has installed (the
# bundle carries its loader, glibc and libpython, and its binutils and gcc made it) and every
# Python distribution frozen into the bundle; deterministic (SOURCE_DATE_EPOCH, a serial derived
# from the contents). Standard library only: this stage's python3 runs it.
COPY tools/release tools/release/
ARG REVISION=unknown
ARG SOURCE_URL=
RUN mkdir -p /rootfs/usr/share/doc/cni-delguard \
    && python3 -m tools.release sbom --arch "$(dpkg --print-architecture)" \
       --version "$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)" \
       --revision "${REVISION}" --source "${SOURCE_URL}" --epoch "${SOURCE_DATE_EPOCH}" \
       --status /var/lib/dpkg/status --bundle /src/dist/cni-delguard \
       /rootfs/usr/share/doc/cni-delguard/sbom.cdx.json

FROM ${RUNTIME}
COPY --from=build /rootfs/ /
# `kubectl exec POD -- cni-delguard doctor --root /host` as the runbooks write it: the image has no
# shell and no other program, so the binary's folder is the whole PATH.
ENV PATH=/usr/lib/cni-delguard
ENTRYPOINT ["/usr/lib/cni-delguard/cni-delguard"]
CMD ["install", "--watch", "--root", "/host"]
