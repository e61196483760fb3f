# The cni-delguard installer image: the frozen one-folder bundle and nothing else.
# Its entrypoint is the binary; by default it runs the long-running installer on a node mounted
# at /host (`install --watch --root /host`); installer/daemonset.yaml passes the same arguments.
# `uninstall --root /host` and `ready --root /host` are the other commands a node needs.
#
# Build with tools/build-image.sh (buildah, no registry needed; amd64 and arm64 and one manifest
# list naming both), or any builder, for any platform it can run:
#   buildah bud --platform linux/arm64 --build-arg BASE=<a Debian bookworm image> -t cni-delguard .
# BASE is the build stage's image; RUNTIME the final one (scratch: the bundle, which carries its
# own loader and C library, and an empty /tmp; pass RUNTIME=<BASE> for an image with a shell).
ARG BASE=docker.io/library/debian:bookworm
ARG RUNTIME=scratch

FROM ${BASE} AS build
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8
# libpython3.11: PyInstaller bundles the shared libpython; binutils: strip, readelf; gcc and
# libc6-dev: the bundle's static launcher (packaging/selfcontain.py).
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends \
       python3 python3-venv libpython3.11 binutils gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# The pins first, in a layer of their own: a change to the sources does not download them again.
COPY pyproject.toml ./
COPY packaging/constraints.txt packaging/
COPY tools/build.sh tools/
RUN python3 -m venv /venv && PYTHON=/venv/bin/python tools/build.sh --pins-only
COPY packaging packaging/
COPY LICENSE ./
COPY cni_delguard cni_delguard/
COPY installer/smoke-test.sh installer/
# The project's build, with this stage's Debian python3.11 as the build root (tools/build.sh
# --here): the pins at packaging/constraints.txt's versions, PyInstaller, its own loader and C
# library, the smoke test. SOURCE_DATE_EPOCH (tools/build-image.sh passes the commit's time) makes
# it the same bundle as tools/build.sh's.
ARG SOURCE_DATE_EPOCH=0
RUN SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH} PYTHON=/venv/bin/python tools/build.sh --here
# The installer itself, from the bundle: install into a fake node, uninstall, byte-identical.
RUN installer/smoke-test.sh /src/dist/cni-delguard/cni-delguard
# The final image's filesystem: the bundle, run there with nothing else to prove it needs nothing.
COPY installer/stage-rootfs.sh installer/
RUN installer/stage-rootfs.sh /src/dist/cni-delguard /rootfs

FROM ${RUNTIME}
COPY --from=build /rootfs/ /
# `kubectl exec POD -- cni-delguard doctor --root /host` as the runbooks write it: the image has no
# shell and no other program, so the binary's folder is the whole PATH.
ENV PATH=/usr/lib/cni-delguard
ENTRYPOINT ["/usr/lib/cni-delguard/cni-delguard"]
CMD ["install", "--watch", "--root", "/host"]
