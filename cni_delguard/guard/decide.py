"""What to do with a DEL, decided from evidence alone (pure: no I/O, table-tested exhaustively).

The deadlock this plugin breaks: a sandbox whose ADD never completed cannot be removed, because its
DEL reaches a delegate (multus, then kube-ovn, ...) that has no state for it and fails. The spec
says DEL must succeed when what it would remove is already gone; when there is no sign that an ADD
ever happened for this attachment, there is nothing to remove, so the guard answers at once.
"""

from __future__ import annotations

from cni_delguard.state.marker import ATTEMPTED, COMPLETED, CORRUPT, DELETING

SKIP = "skip"
FORWARD_LENIENT = "forward-lenient"
FORWARD_STRICT = "forward-strict"
# A strict DEL whose delegate failed, answered with success on an operator's word (ops/release.py).
RELEASED = "released"
# A deadlock break: a DEL answered with success although the delegate failed it, for the
# metrics and for `cni-delguard stats` alike.
BREAKS = (FORWARD_LENIENT, RELEASED)


class Evidence:
    """Signs that an ADD happened for one attachment (see evidence.gather)."""

    __slots__ = (
        "bad_result_cache",
        "lock",
        "marker",
        "multus_cache",
        "prev_result",
        "result_cache",
    )

    def __init__(
        self,
        marker: str | None = None,
        result_cache: bool = False,
        multus_cache: bool = False,
        prev_result: bool = False,
        lock: bool = False,
        bad_result_cache: bool = False,
    ) -> None:
        self.marker = marker  # None, ATTEMPTED, COMPLETED, DELETING or CORRUPT
        self.result_cache = result_cache  # a libcni cache that holds a result
        self.multus_cache = multus_cache
        self.prev_result = prev_result
        self.lock = lock  # a lock file: an operation is running, or one was killed
        # A file where libcni's cache would be that is not a libcni cache of a result: empty,
        # torn by a crash while libcni wrote it (it writes in place), or something else.
        self.bad_result_cache = bad_result_cache

    def names(self) -> list[str]:
        found = []
        if self.marker is not None:
            found.append(f"marker:{self.marker}")
        if self.result_cache:
            found.append("libcni-cache")
        if self.bad_result_cache:
            found.append("libcni-cache-invalid")
        if self.multus_cache:
            found.append("multus-cache")
        if self.prev_result:
            found.append("prevResult")
        if self.lock:
            found.append("lock")
        return found

    def needs_lock(self) -> bool:
        """Anything at all on disk or in stdin: decide again under the attachment's lock."""
        return bool(self.names())


def decide_del(ev: Evidence) -> tuple[str, str]:
    """(decision, reason) for a DEL. The lock file alone is not evidence of an ADD."""
    if ev.marker == DELETING:
        # Our own record beats the caches: an earlier DEL reached the delegate and the guard died
        # before it could finish. The delegate may have deleted everything already, and one that
        # fails without state (kube-ovn through multus) would otherwise fail this DEL forever.
        return FORWARD_LENIENT, "an earlier DEL was interrupted: forward DEL, failures are ignored"
    if ev.prev_result or ev.result_cache or ev.marker == COMPLETED:
        # libcni writes its cache and passes prevResult only after the whole ADD succeeded:
        # there may be real state to delete, so a delegate failure must reach the runtime.
        return FORWARD_STRICT, "ADD completed: forward DEL, delegate errors are returned"
    if ev.marker in (ATTEMPTED, CORRUPT):
        # ADD started through us and never completed: the delegate may hold partial state (so
        # it gets the DEL), but it may also have none and fail; that must not block removal.
        return FORWARD_LENIENT, "ADD attempted, never completed: forward DEL, failures are ignored"
    if ev.bad_result_cache:
        # libcni writes its cache in place after the ADD: an empty or torn one proves only
        # that something was written, not that the ADD completed.
        return FORWARD_LENIENT, (
            "libcni cache is not a valid result (ADD at most attempted): forward DEL, "
            "failures are ignored"
        )
    if ev.multus_cache:
        # multus saves its cache before it runs any delegate and keeps it when an ADD fails: a
        # sandbox whose ADD failed before the guard was installed has this and nothing else.
        # Its delegates may hold partial state (so they get the DEL), but failing the DEL would
        # keep the sandbox stuck for good (multus's retryDeleteOnError keeps the cache).
        return FORWARD_LENIENT, (
            "multus cache only (ADD attempted, never completed): forward DEL, failures are ignored"
        )
    return SKIP, "no evidence of ADD: nothing to delete, delegate not called"
