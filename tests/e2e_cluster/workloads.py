"""The workloads the scenarios run on the cluster, and the one image they need beside the pause
image (tests/e2e_cri/pause_image.py): no registry is reachable, so both are built here and
imported into the node's runtime.

- `app`: a Deployment of pods that only wait (the pause program), pulled never.
- `csi`: seed 004's longhorn-csi-plugin, reduced to what made it the chokepoint: a DaemonSet pod
  that creates the node's CSI socket (a unix socket in a hostPath dir under /var/lib/kubelet/
  plugins), and pods that cannot start until something listens on it (their init container
  connects to it, once a second, as the CSI sidecars do before they crash-loop). After a reboot
  the socket file is still on disk but nothing listens until the plugin's pod runs again.

The image's one program (static C, like the pause program): `csi serve PATH` binds and listens
on PATH (removing a stale file first) and waits; `csi wait PATH` returns once a connect to PATH
succeeds.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.e2e_cri import pause_image

CSI_IMAGE = "localhost/delguard-e2e/csi:1"
APP_NAMESPACE = "apps"
CSI_DIR = "/var/lib/kubelet/plugins/csi.delguard.e2e"  # on the node
CSI_SOCKET = "/csi/csi.sock"  # in the pods

CSI_C = r"""
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void bye(int sig) { (void)sig; _exit(0); }

int main(int argc, char **argv) {
    struct sockaddr_un addr;
    int fd;
    if (argc != 3 || strlen(argv[2]) >= sizeof(addr.sun_path)) {
        fputs("usage: csi serve|wait PATH\n", stderr);
        return 2;
    }
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    strcpy(addr.sun_path, argv[2]);
    signal(SIGTERM, bye);
    if (strcmp(argv[1], "serve") == 0) {
        unlink(argv[2]);
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0
            || listen(fd, 64) != 0) {
            perror("csi serve");
            return 1;
        }
        for (;;) pause();
    }
    for (;;) {
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0) return 0;
        if (fd >= 0) close(fd);
        fputs("csi wait: nothing listens yet\n", stderr);
        sleep(1);
    }
}
"""


def build_csi_image(work: Path) -> Path:
    """Compile the program and pack it as an OCI archive (pause_image's packing)."""
    work.mkdir(parents=True, exist_ok=True)
    source, binary = work / "csi.c", work / "csi"
    source.write_text(CSI_C, encoding="utf-8")
    subprocess.run(["gcc", "-static", "-Os", "-s", "-o", str(binary), str(source)], check=True,
                   capture_output=True, timeout=120)
    archive = work / "csi-image.tar"
    archive.write_bytes(pause_image.oci_archive(binary.read_bytes(), CSI_IMAGE))
    return archive


def _container(name: str, image: str, command: list[str]) -> dict[str, Any]:
    return {"name": name, "image": image, "imagePullPolicy": "Never", "command": command}


def _pod_spec(containers: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    return {"containers": containers, "enableServiceLinks": False,
            "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 2,
            "dnsPolicy": "Default", **more}


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": dict(labels or {})}}


def deployment(name: str, replicas: int, needs_csi: bool = False) -> dict[str, Any]:
    """`replicas` pods of the pause program; with needs_csi, each waits for the CSI socket
    first (an init container), as a pod with a Longhorn volume waits for its plugin."""
    labels = {"app": name}
    extra: dict[str, Any] = {}
    if needs_csi:
        extra = {"initContainers": [_container("wait-csi", CSI_IMAGE,
                                               ["/pause", "wait", CSI_SOCKET])
                                    | {"volumeMounts": [{"name": "csi", "mountPath": "/csi"}]}],
                 "volumes": [_csi_volume()]}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": APP_NAMESPACE},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     # The pods go as fast as they come: no surge or availability to wait for.
                     "strategy": {"type": "Recreate"},
                     "template": {"metadata": {"labels": labels}, "spec": _pod_spec(
                         [_container("main", pause_image.IMAGE_REF, ["/pause"])], **extra)}}}


def csi_daemonset() -> dict[str, Any]:
    labels = {"app": "csi-plugin"}
    container = _container("plugin", CSI_IMAGE, ["/pause", "serve", CSI_SOCKET])
    container["volumeMounts"] = [{"name": "csi", "mountPath": "/csi"}]
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "csi-plugin", "namespace": APP_NAMESPACE},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": _pod_spec([container], volumes=[_csi_volume()],
                                                    tolerations=[{"operator": "Exists"}])}}}


def _csi_volume() -> dict[str, Any]:
    return {"name": "csi", "hostPath": {"path": CSI_DIR, "type": "DirectoryOrCreate"}}


def plain_pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": APP_NAMESPACE, "labels": {"app": "churn"}},
            "spec": _pod_spec([_container("main", pause_image.IMAGE_REF, ["/pause"])])}


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
