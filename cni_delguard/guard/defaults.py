"""Defaults of the guard's optional config keys (docs/configuration.md, docs/DESIGN.md)."""

from __future__ import annotations

STATE_DIR = "/var/lib/cni/delguard"
# libcni (containerd, CRI-O, cnitool) caches ADD results under <cacheDir>/results.
RESULT_CACHE_DIRS = ("/var/lib/cni/results",)
# multus thin plugin's default cniDir.
MULTUS_CACHE_DIRS = ("/var/lib/cni/multus",)
# Seconds per delegate call: none fires before the runtime's caller gives up on that call
# (docs/how-it-decides.md "Timeouts"): the kubelet's default deadlines, RunPodSandbox 240 s, every
# other CRI call 120 s (its runtimeRequestTimeout, 2m). node/kubeletconf.py raises them for a
# kubelet that waits longer.
TIMEOUTS = {"add": 240.0, "del": 120.0, "check": 120.0, "gc": 120.0, "status": 120.0}
LOCK_TIMEOUT = 10.0
LOG_FILE = "/var/log/cni-delguard/delguard.log"
LOG_LEVEL = "info"
# "enforce": the guard decides DELs; "observe": every DEL is forwarded as if the guard were not
# there, and the log says what it would have decided (for a cautious roll-out).
ENFORCE = "enforce"
OBSERVE = "observe"
MODE = ENFORCE
