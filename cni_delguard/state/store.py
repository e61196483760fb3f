"""The marker store: one small file per attachment that says an ADD was attempted or completed.

Layout (docs/DESIGN.md): <stateDir>/networks/<network>/<key>.json, with <key>.lock beside it,
and <key>.release when an operator released the attachment (ops/release.py).
The store works through directory descriptors (fsutil), so it never follows a symlink, and it
never holds more than one marker per attachment.
"""

from __future__ import annotations

import os
import time

from cni_delguard.cni import errors, jsonlite
from cni_delguard.cni.skel import valid_network
from cni_delguard.state import fsutil
from cni_delguard.state.marker import CORRUPT, KNOWN

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

NETWORKS = "networks"
MARKER_SUFFIX = ".json"
LOCK_SUFFIX = ".lock"
# An operator's word that this attachment's DEL may succeed even if the delegate's DEL fails.
RELEASE_SUFFIX = ".release"
# A file name has at most 255 bytes; leave room for the suffixes and the temp-file decoration.
_MAX_KEY = 200
# The last second an ISO 8601 UTC stamp with a four-digit year can show (9999-12-31T23:59:59Z).
MAX_EPOCH = 253402300799


def attachment_key(container_id: str, ifname: str) -> str:
    """`<containerID>:<ifname>` (neither may contain ':'), hashed when too long for a file name."""
    key = f"{container_id}:{ifname}"
    if len(key.encode("utf-8", "surrogateescape")) <= _MAX_KEY:
        return key
    return "sha256-" + fsutil.sha256_hex(key.encode("utf-8", "surrogateescape"))


def network_dir(state_dir: str, network: str) -> str:
    return os.path.join(state_dir, NETWORKS, network)


def marker_path(state_dir: str, network: str, key: str) -> str:
    return os.path.join(network_dir(state_dir, network), key + MARKER_SUFFIX)


def lock_path(state_dir: str, network: str, key: str) -> str:
    return os.path.join(network_dir(state_dir, network), key + LOCK_SUFFIX)


def lock_name(key: str) -> str:
    """The lock file's name in its network dir (opened through that dir's descriptor)."""
    return key + LOCK_SUFFIX


def epoch(value: object) -> float | None:
    """A `time` read from a marker or a release record, when it is a UNIX time the tools can
    show: a finite number from 1970 to the year 9999. Anything else (a bool, a string, NaN,
    1e999, a 400-digit integer that float() cannot even convert) is None: unknown."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not 0 <= value <= MAX_EPOCH:  # NaN fails every comparison; a huge int never converts
        return None
    return float(value)


class NetworkDir:
    """One entry of `<stateDir>/networks`: its fd when the guard may read it, else why not."""

    __slots__ = ("fd", "name", "path", "skipped")

    def __init__(self, name: str, path: str, fd: int | None, skipped: str | None) -> None:
        self.name, self.path, self.fd, self.skipped = name, path, fd, skipped


def network_dirs(state_dir: str) -> Iterator[NetworkDir]:
    """Every entry of `<stateDir>/networks`, sorted, under the one rule every reader of the
    state dir shares (list, doctor, release, metrics, GC): a network dir is read only when its
    name is a network name the guard could have written, and it opens as the guard's own
    directory (not a symlink, a directory, owned by our euid, not writable by group or others;
    fsutil.open_subdir). Anything else is yielded with `skipped` (why) and no fd: never read,
    never written through. The fd is closed when the caller moves on.

    FileNotFoundError when the state dir is missing; UnsafeDirError (a CniError) when the state
    dir or `networks` itself is unusable. A missing `networks` yields nothing."""
    root = fsutil.open_dir(state_dir)
    nets_path = os.path.join(state_dir, NETWORKS)
    try:
        nets = fsutil.open_subdir(root, NETWORKS, nets_path, create=False)
    except FileNotFoundError:
        return
    finally:
        os.close(root)
    try:
        for name in sorted(os.listdir(nets)):
            yield from _network_dir(nets, name, os.path.join(nets_path, name))
    finally:
        os.close(nets)


def _network_dir(nets: int, name: str, path: str) -> Iterator[NetworkDir]:
    if not valid_network(name):
        yield NetworkDir(name, path, None, "not a network name the guard writes")
        return
    try:
        fd = fsutil.open_subdir(nets, name, path, create=False)
    except fsutil.UnsafeDirError as exc:
        yield NetworkDir(name, path, None, exc.why)
        return
    except OSError as exc:  # gone meanwhile, EACCES, EIO
        yield NetworkDir(name, path, None, f"cannot open it: {exc.strerror or exc}")
        return
    try:
        yield NetworkDir(name, path, fd, None)
    finally:
        os.close(fd)


# The longest reason `release` takes, and the most of one the guard logs.
MAX_REASON = 500


class Release:
    """An operator's release record as found (ops/release.py writes it): its fields, the owner
    fstat gives, and `refused`, why it does not count, when it does not."""

    __slots__ = ("fields", "owner", "refused")

    def __init__(self, fields: dict[str, object], owner: int | None, refused: str | None) -> None:
        self.fields, self.owner, self.refused = fields, owner, refused

    def logged(self) -> dict[str, object]:
        """What the decision log says of it: the reason when it is text (MAX_REASON
        characters at most), the time when it is a time, and the owner's uid from fstat, never
        what the file claims."""
        reason = self.fields.get("reason")
        text = reason[:MAX_REASON] if isinstance(reason, str) else "no reason recorded"
        given: dict[str, object] = {"reason": text}
        when = epoch(self.fields.get("time"))
        if when is not None:
            given["time"] = when
        given["uid"] = self.owner
        return given


def parse_marker(data: bytes | None) -> str | None:
    """The state a marker records; CORRUPT for anything we did not write."""
    if data is None:
        return None
    try:
        state = jsonlite.loads(data).get("state")
    except (ValueError, AttributeError):
        return CORRUPT
    return state if state in KNOWN else CORRUPT


class MarkerStore:
    """Markers of one network, opened (and created) safely under the state dir."""

    def __init__(
        self,
        state_dir: str,
        network: str,
        create: bool,
        pod: dict[str, str] | None = None,
        *,
        make_state_dir: bool | None = None,
    ) -> None:
        """With `create`, the guard's own dirs in the state dir (`networks`, the network's) are
        made when missing, and the state dir itself when `make_state_dir` says so (the plugin's
        commands pass config.Settings.make_state_dir; None: as `create`), only ever as a leaf
        of a dir that exists (fsutil.walk)."""
        self.path = network_dir(state_dir, network)
        make_root = create if make_state_dir is None else make_state_dir
        # The pod (skel.pod_identity) every marker written through this store names.
        self.pod = pod
        try:
            self.fd = self._open(state_dir, network, create, make_root)
        except FileNotFoundError:
            if not create:
                raise
            raise errors.CniError(errors.IO_FAILURE, f"cannot create {self.path}") from None
        except OSError as exc:  # ENOSPC, EROFS, EACCES ...
            raise errors.CniError(errors.IO_FAILURE, f"cannot open {self.path}", str(exc)) from None

    def _open(self, state_dir: str, network: str, create: bool, make_root: bool) -> int:
        root = fsutil.walk(state_dir, create=make_root)
        try:
            nets = fsutil.open_subdir(root, NETWORKS, os.path.join(state_dir, NETWORKS), create)
        finally:
            os.close(root)
        try:
            return fsutil.open_subdir(nets, network, self.path, create)
        finally:
            os.close(nets)

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> MarkerStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write(
        self,
        key: str,
        state: str,
        container_id: str,
        ifname: str,
        *,
        durable: bool = True,
        **extra: object,
    ) -> None:
        self._put(key, self.new_body(state, container_id, ifname, **extra), durable)

    def new_body(
        self, state: str, container_id: str, ifname: str, **extra: object
    ) -> dict[str, object]:
        """A marker as write() puts it: its state, the attachment, the time, the pod."""
        body: dict[str, object] = {
            "state": state,
            "containerID": container_id,
            "ifname": ifname,
            "time": round(time.time(), 3),
            **extra,
        }
        if self.pod is not None:
            body["pod"] = dict(self.pod)
        return body

    def restore(self, key: str, body: dict[str, object]) -> None:
        """Put back a marker as it was read (or remove it when there was none)."""
        if body:
            self._put(key, body, durable=True)
        else:
            self.remove(key)

    def _put(self, key: str, body: dict[str, object], durable: bool) -> None:
        try:
            fsutil.write_atomic(
                self.fd, key + MARKER_SUFFIX, jsonlite.dumps(body).encode(), durable=durable
            )
        except OSError as exc:
            raise errors.CniError(
                errors.IO_FAILURE,
                f"cannot record {body.get('state')} marker in {self.path}",
                str(exc),
            ) from None

    def body(self, key: str) -> dict[str, object]:
        """The marker's fields; empty when it is missing or unreadable."""
        return marker_body(self.fd, key)

    def release(self, key: str) -> Release | None:
        """The operator's release record of this attachment; None when there is none.

        Only root's own record counts (it lets a DEL leak state on purpose): a regular file,
        not a symlink, owned by our euid, not writable by group or others, one link, in this
        network dir (which the store opened as ours). A record written by someone else while
        the dir was mis-moded stays refused after the mode is repaired. A record of root's that
        cannot be parsed still stands (the file is the operator's word): its fields are then
        empty."""
        try:
            info = fsutil.read_regular(self.fd, key + RELEASE_SUFFIX)
        except FileNotFoundError:
            return None
        except OSError as exc:  # a symlink, a FIFO, too big, unreadable
            return Release({}, None, f"{key}{RELEASE_SUFFIX}: {exc.strerror or exc}")
        why = info.distrust()
        if why is not None:
            return Release({}, info.uid, f"{key}{RELEASE_SUFFIX}: {why}")
        return Release(_fields(info.data) or {}, info.uid, None)

    def put_release(self, key: str, body: dict[str, object]) -> None:
        """Write the release record: atomic, fsynced, 0600, never through a symlink."""
        fsutil.write_atomic(self.fd, key + RELEASE_SUFFIX, jsonlite.dumps(body).encode())

    def drop_release(self, key: str) -> None:
        """Forget a release record: it was given for an ADD that is now being replaced."""
        fsutil.unlink_at(self.fd, key + RELEASE_SUFFIX)

    def exists(self, key: str) -> bool:
        """Whether a marker (or anything at its name) is there, readable or not."""
        try:
            os.stat(key + MARKER_SUFFIX, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def remove(self, key: str) -> None:
        """Remove the marker, its release record, and any temp file a killed writer left."""
        fsutil.unlink_at(self.fd, key + MARKER_SUFFIX)
        fsutil.unlink_at(self.fd, key + RELEASE_SUFFIX)
        prefixes = (f".{key}{MARKER_SUFFIX}.", f".{key}{RELEASE_SUFFIX}.")
        for name in os.listdir(self.fd):
            if name.startswith(prefixes) and name.endswith(".tmp"):
                fsutil.unlink_at(self.fd, name)


def marker_body(dir_fd: int, key: str) -> dict[str, object]:
    """The fields of the marker `key` in a network dir's fd; empty when missing or unreadable."""
    return _fields(fsutil.read_at(dir_fd, key + MARKER_SUFFIX)) or {}


def _fields(data: bytes | None) -> dict[str, object] | None:
    """A small JSON object's fields; None when missing or not a JSON object."""
    if data is None:
        return None
    try:
        body = jsonlite.loads(data)
    except (ValueError, RecursionError):
        return None
    return body if isinstance(body, dict) else None
