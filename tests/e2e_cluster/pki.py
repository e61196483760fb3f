"""The cluster's certificates and keys, made by the test with openssl(1) (Debian's `openssl`), as
kubeadm lays them out: one CA, the API server's serving certificate, a client certificate per
component, the service-account signing key. Valid for a day; never used outside the node.

Each certificate is one row of CERTS (variation as data): its file name, its subject (CN and O,
which the API server reads as the user and its groups), whether it serves or is a client, and
the names a serving certificate covers. EC P-256 keys (milliseconds each); the service-account
key is RSA, the key type every Kubernetes release has accepted there.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

DAYS = "1"
SERVICE_IP = "10.96.0.1"  # the first address of the service range: the `kubernetes` service


@dataclass(frozen=True)
class Cert:
    name: str  # <name>.crt and <name>.key
    cn: str
    org: str = ""
    serving: bool = False


def certs(node_name: str) -> tuple[Cert, ...]:
    """kubeadm's set, by its names and subjects (kubeadm's pkg/cmd/phases/certs)."""
    return (
        Cert("apiserver", "kube-apiserver", serving=True),
        Cert("apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"),
        Cert("admin", "kubernetes-admin", "system:masters"),
        Cert("kubelet", f"system:node:{node_name}", "system:nodes"),
        Cert("controller-manager", "system:kube-controller-manager"),
        Cert("scheduler", "system:kube-scheduler"),
    )


@dataclass(frozen=True)
class Pki:
    dir: Path
    node_ip: str

    @property
    def ca(self) -> Path:
        return self.dir / "ca.crt"

    def crt(self, name: str) -> Path:
        return self.dir / f"{name}.crt"

    def key(self, name: str) -> Path:
        return self.dir / f"{name}.key"

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"

    @classmethod
    def make(cls, directory: Path, node_name: str, node_ip: str) -> Pki:
        directory.mkdir(parents=True, mode=0o700)
        pki = cls(directory, node_ip)
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                 "-nodes", "-days", DAYS, "-subj", "/CN=kubernetes", "-keyout",
                 str(directory / "ca.key"), "-out", str(pki.ca))
        for cert in certs(node_name):
            pki._issue(cert)
        _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
                 "-out", str(pki.sa_key))
        _openssl("pkey", "-in", str(pki.sa_key), "-pubout", "-out", str(pki.sa_pub))
        return pki

    def _issue(self, cert: Cert) -> None:
        config = self.dir / f"{cert.name}.cnf"
        subject = f"CN = {cert.cn}\n" + (f"O = {cert.org}\n" if cert.org else "")
        usage = "serverAuth" if cert.serving else "clientAuth"
        ext = ("basicConstraints = critical, CA:FALSE\n"
               "keyUsage = critical, digitalSignature, keyEncipherment\n"
               f"extendedKeyUsage = {usage}\n")
        if cert.serving:
            names = ["DNS:kubernetes", "DNS:kubernetes.default", "DNS:kubernetes.default.svc",
                     "DNS:kubernetes.default.svc.cluster.local", "DNS:localhost",
                     "IP:127.0.0.1", f"IP:{self.node_ip}", f"IP:{SERVICE_IP}"]
            ext += f"subjectAltName = {', '.join(names)}\n"
        config.write_text("[req]\nprompt = no\ndistinguished_name = dn\n"
                          f"[dn]\n{subject}[ext]\n{ext}", encoding="ascii")
        csr = self.dir / f"{cert.name}.csr"
        _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                 "-nodes", "-config", str(config), "-keyout", str(self.key(cert.name)),
                 "-out", str(csr))
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(self.ca), "-CAkey",
                 str(self.dir / "ca.key"), "-CAcreateserial", "-days", DAYS, "-extfile",
                 str(config), "-extensions", "ext", "-out", str(self.crt(cert.name)))

    def kubeconfig(self, path: Path, user: str, server: str) -> Path:
        """A kubeconfig naming the server, trusting the CA, as the client certificate `user`;
        paths, not embedded data: every reader runs on this machine."""
        text = (
            "apiVersion: v1\nkind: Config\ncurrent-context: dgcl\n"
            f"clusters:\n- name: dgcl\n  cluster:\n    server: {server}\n"
            f"    certificate-authority: {self.ca}\n"
            f"users:\n- name: {user}\n  user:\n    client-certificate: {self.crt(user)}\n"
            f"    client-key: {self.key(user)}\n"
            f"contexts:\n- name: dgcl\n  context:\n    cluster: dgcl\n    user: {user}\n"
        )
        path.write_text(text, encoding="utf-8")
        path.chmod(0o600)
        return path


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)
