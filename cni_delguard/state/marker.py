"""The states a marker records: the vocabulary the store writes and the DEL decision reads.

Names only, no I/O, so that the pure decision core (guard/decide.py) can use them without
importing the store.
"""

from __future__ import annotations

ATTEMPTED = "attempted"
COMPLETED = "completed"
# A DEL is being forwarded: if the guard dies before it finishes, the next DEL knows the delegate
# may already have deleted everything (and may fail for lack of state, like kube-ovn).
DELETING = "deleting"
# Anything the guard did not write: unreadable, not JSON, an unknown state.
CORRUPT = "corrupt"
KNOWN = (ATTEMPTED, COMPLETED, DELETING)
