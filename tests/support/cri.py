"""A small CRI client: stubs generated at test time from Debian's CRI api.proto.

crictl is not packaged by Debian. The CRI runtime v1 api.proto is
(golang-github-kubernetes-cri-api-dev in trixie); tools/e2e-fetch-cri-proto.sh puts it into the
cache. Its gogo-protobuf options only matter to Go code generation, so they are stripped before
grpc_tools.protoc runs. The stubs go into a cache dir keyed by the proto's hash and the
grpcio-tools version; nothing generated is committed.
"""

from __future__ import annotations

import hashlib
import importlib
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "cri_runtime_v1"  # the generated modules' package (a namespace package)

_GOGO_IMPORT = re.compile(
    r'^\s*import\s+"github\.com/gogo/protobuf/gogoproto/gogo\.proto";\s*$', re.M
)
_GOGO_FILE_OPTION = re.compile(r"^\s*option\s+\(gogoproto\.[a-z_]+\)\s*=\s*[^;]+;\s*$", re.M)
_GOGO_FIELD_OPTION = re.compile(r"\s*\[\s*\(gogoproto\.[^\]]*\]")


def strip_gogo(proto: str) -> str:
    """Remove the gogo-protobuf import and options; fail if any reference is left."""
    text = _GOGO_IMPORT.sub("", proto)
    text = _GOGO_FILE_OPTION.sub("", text)
    text = _GOGO_FIELD_OPTION.sub("", text)
    if "gogoproto" in text:
        raise ValueError("api.proto: a gogoproto reference survived stripping")
    return text


def fetch_proto(cache: Path) -> Path:
    """The cached api.proto, fetched from Debian first if it is missing."""
    proto = cache / "cri-api" / "api.proto"
    if not proto.is_file():
        subprocess.run(
            [str(REPO / "tools" / "e2e-fetch-cri-proto.sh")],
            check=True,
            env={"DELGUARD_E2E_CACHE": str(cache), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        )
    return proto


def _tools_version() -> str:
    from importlib.metadata import version

    return version("grpcio-tools")


def generate_stubs(proto: Path, cache: Path) -> Path:
    """Generate (once) the Python stubs for proto; return the dir to put on sys.path."""
    source = strip_gogo(proto.read_text(encoding="utf-8"))
    key = hashlib.sha256(f"{source}\0{_tools_version()}".encode()).hexdigest()[:16]
    out = cache / "cri-stubs" / key
    if (out / PACKAGE / "api_pb2_grpc.py").is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".gen-", dir=out.parent))
    try:
        _run_protoc(source, work)
        work.rename(out)
    except OSError:
        if not (out / PACKAGE / "api_pb2_grpc.py").is_file():  # not a concurrent winner
            raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def _run_protoc(source: str, work: Path) -> None:
    import grpc_tools

    (work / PACKAGE).mkdir()
    (work / PACKAGE / "api.proto").write_text(source, encoding="utf-8")
    include = Path(grpc_tools.__file__).parent / "_proto"
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{work}", f"-I{include}",
         f"--python_out={work}", f"--grpc_python_out={work}", f"{PACKAGE}/api.proto"],
        check=True,
    )


@dataclass(frozen=True)
class Stubs:
    pb: ModuleType  # api_pb2: the messages
    grpc: ModuleType  # api_pb2_grpc: RuntimeServiceStub, ImageServiceStub


def load_stubs(cache: Path) -> Stubs:
    path = str(generate_stubs(fetch_proto(cache), cache))
    if path not in sys.path:
        sys.path.insert(0, path)
    return Stubs(
        pb=importlib.import_module(f"{PACKAGE}.api_pb2"),
        grpc=importlib.import_module(f"{PACKAGE}.api_pb2_grpc"),
    )


@dataclass(frozen=True)
class PodSpec:
    """What identifies a pod to the runtime (the sandbox name is built from it)."""

    name: str
    namespace: str = "delguard-e2e"
    uid: str = ""
    attempt: int = 0

    def reserved_name(self) -> str:
        return f"{self.name}_{self.namespace}_{self.uid}_{self.attempt}"


class CriClient:
    """The few RuntimeService calls the tests need, with explicit deadlines."""

    def __init__(self, socket: Path, stubs: Stubs, cgroup_parent: str) -> None:
        self.pb = stubs.pb
        self._stubs = stubs
        self._socket = socket
        self._cgroup_parent = cgroup_parent
        self._connect()

    def _connect(self) -> None:
        import grpc

        self._channel = grpc.insecure_channel(f"unix://{self._socket}")
        self._rt = self._stubs.grpc.RuntimeServiceStub(self._channel)
        self._img = self._stubs.grpc.ImageServiceStub(self._channel)

    def reconnect(self) -> None:
        """A fresh channel after containerd restarted (no waiting out gRPC's reconnect backoff)."""
        self._channel.close()
        self._connect()

    def close(self) -> None:
        self._channel.close()

    def version(self, timeout: float = 5) -> Any:
        return self._rt.Version(self.pb.VersionRequest(), timeout=timeout)

    def image_known(self, ref: str, timeout: float = 5) -> bool:
        """Whether the CRI image store has ref (ctr's import reaches it through an event)."""
        spec = self.pb.ImageSpec(image=ref)
        reply = self._img.ImageStatus(self.pb.ImageStatusRequest(image=spec), timeout=timeout)
        return bool(reply.image.id)

    def cni_config(self, timeout: float = 5) -> str:
        """containerd's loaded CNI config, as its verbose Status reports it."""
        reply = self._rt.Status(self.pb.StatusRequest(verbose=True), timeout=timeout)
        return str(reply.info.get("cniconfig", ""))

    def sandbox_config(self, pod: PodSpec) -> Any:
        pb = self.pb
        return pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(
                name=pod.name, namespace=pod.namespace, uid=pod.uid, attempt=pod.attempt
            ),
            hostname=pod.name,
            # Own DNS settings, so the host's resolv.conf is never read.
            dns_config=pb.DNSConfig(servers=["127.0.0.1"], searches=[], options=[]),
            # As the kubelet asks for a pod without shareProcessNamespace: a PID namespace per
            # container (so CRI-O runs no infra container), network and IPC per pod.
            linux=pb.LinuxPodSandboxConfig(
                cgroup_parent=self._cgroup_parent,
                security_context=pb.LinuxSandboxSecurityContext(
                    namespace_options=pb.NamespaceOption(
                        network=pb.NamespaceMode.POD, pid=pb.NamespaceMode.CONTAINER,
                        ipc=pb.NamespaceMode.POD))),
        )

    def run_pod(self, pod: PodSpec, timeout: float = 60) -> str:
        reply = self._rt.RunPodSandbox(
            self.pb.RunPodSandboxRequest(config=self.sandbox_config(pod)), timeout=timeout
        )
        return str(reply.pod_sandbox_id)

    def run_pod_future(self, pod: PodSpec, timeout: float | None = None) -> Any:
        """Start RunPodSandbox without waiting; the returned future gives the id or raises."""
        return self._rt.RunPodSandbox.future(
            self.pb.RunPodSandboxRequest(config=self.sandbox_config(pod)), timeout=timeout
        )

    def stop_pod(self, sandbox_id: str, timeout: float = 60) -> None:
        self._rt.StopPodSandbox(
            self.pb.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=timeout
        )

    def remove_pod(self, sandbox_id: str, timeout: float = 60) -> None:
        self._rt.RemovePodSandbox(
            self.pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=timeout
        )

    def pod_status(self, sandbox_id: str, timeout: float = 10) -> Any:
        reply = self._rt.PodSandboxStatus(
            self.pb.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id), timeout=timeout
        )
        return reply.status

    def list_pods(self, timeout: float = 10) -> list[Any]:
        return list(self._rt.ListPodSandbox(self.pb.ListPodSandboxRequest(), timeout=timeout).items)

    def state_name(self, state: int) -> str:
        return str(self.pb.PodSandboxState.Name(state))
