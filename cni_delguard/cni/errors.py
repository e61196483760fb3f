"""The one error type of the plugin, and the CNI spec's error codes.

Every failure the runtime should see is a CniError; cli.py is the only place that turns one into
error JSON on stdout and a non-zero exit code. A delegate's own error is carried through verbatim
(DelegateError keeps the bytes it printed) and is never wrapped again.
"""

from __future__ import annotations

# Codes 0-99 are reserved by the CNI spec (SPEC.md, "Error").
INCOMPATIBLE_VERSION = 1
UNSUPPORTED_FIELD = 2
UNKNOWN_CONTAINER = 3
INVALID_ENV = 4
IO_FAILURE = 5
DECODING_FAILURE = 6
INVALID_CONFIG = 7
TRY_AGAIN_LATER = 11
STATUS_NOT_AVAILABLE = 50
# 100+ are plugin-specific.
DELEGATE_NOT_FOUND = 100
DELEGATE_BAD_OUTPUT = 101
# The catch-all for anything unexpected, as in the reference skel (types.ErrInternal).
INTERNAL = 999


class CniError(Exception):
    """A failure reported to the runtime as CNI error JSON."""

    def __init__(self, code: int, msg: str, details: str = "") -> None:
        super().__init__(msg)
        self.code = code
        self.msg = msg
        self.details = details

    def to_json(self, cni_version: str) -> bytes:
        body = {"cniVersion": cni_version, "code": self.code, "msg": self.msg}
        if self.details:
            body["details"] = self.details
        from cni_delguard.cni import jsonlite

        return jsonlite.dumps(body).encode()

    def exit_code(self) -> int:
        return 1


class DelegateError(CniError):
    """The delegate failed with a well-formed CNI error: its output goes out unchanged."""

    def __init__(self, code: int, msg: str, raw: bytes, exit_status: int) -> None:
        super().__init__(code, msg)
        self.raw = raw
        self.exit_status = exit_status

    def to_json(self, cni_version: str) -> bytes:
        return self.raw

    def exit_code(self) -> int:
        return self.exit_status if 0 < self.exit_status < 256 else 1
