"""Defaults of the guard's optional config keys (docs/configuration.md, docs/DESIGN.md)."""

from __future__ import annotations

STATE_DIR = "/var/lib/cni/delguard"
# libcni (containerd, CRI-O, cnitool) caches ADD results under <cacheDir>/results.
RESULT_CACHE_DIRS = ("/var/lib/cni/results",)
# multus thin plugin's default cniDir.
MULTUS_CACHE_DIRS = ("/var/lib/cni/multus",)
TIMEOUTS = {"add": 180.0, "del": 60.0, "check": 60.0, "gc": 120.0, "status": 10.0}
LOCK_TIMEOUT = 10.0
LOG_FILE = "/var/log/cni-delguard/delguard.log"
LOG_LEVEL = "info"
# "enforce": the guard decides DELs; "observe": every DEL is forwarded as if the guard were not
# there, and the log says what it would have decided (for a cautious roll-out).
ENFORCE = "enforce"
OBSERVE = "observe"
MODE = ENFORCE
