"""tests/support/cri.py under its former name, for the suites that still import it from
here (the kubelet and cluster suites, tests/node_roots): the very same module, not a copy."""

from __future__ import annotations

import sys

from tests.support import cri

sys.modules[__name__] = cri
