"""tests/e2e_cri/scenario.py not_by_deadline: which errors of a call past its client deadline
mean the deadline ended it (the server's RST_STREAM(CANCEL) included), and which do not."""

from __future__ import annotations

import grpc
import pytest

from tests.e2e_cri.scenario import SERVER_DEADLINE_RESET, not_by_deadline

CODE = grpc.StatusCode
RESET = f"Stream removed (RST_STREAM ({SERVER_DEADLINE_RESET}))"  # as grpc-python 1.85 says it


@pytest.mark.parametrize(
    ("code", "text", "elapsed", "by_deadline"),
    [
        pytest.param(CODE.DEADLINE_EXCEEDED, "Deadline Exceeded", 8.002, True, id="client-timer"),
        pytest.param(CODE.CANCELLED, RESET, 8.0012, True, id="server-reset-first"),
        pytest.param(CODE.CANCELLED, RESET, 3.0, False, id="server-reset-early"),
        pytest.param(CODE.DEADLINE_EXCEEDED, "Deadline Exceeded", 2.0, False, id="too-early"),
        pytest.param(CODE.CANCELLED, "Cancelled", 8.1, False, id="cancelled-otherwise"),
        pytest.param(CODE.CANCELLED, "Received RST_STREAM with error code 2", 8.1, False,
                     id="other-reset"),
        pytest.param(CODE.UNAVAILABLE, "Socket closed", 8.1, False, id="runtime-gone"),
        pytest.param(CODE.UNKNOWN, "failed to setup network", 8.1, False, id="add-failed"),
    ],
)
def test_not_by_deadline(code: grpc.StatusCode, text: str, elapsed: float,
                         by_deadline: bool) -> None:
    why = not_by_deadline(code, text, elapsed, 8)
    assert (why is None) == by_deadline, why
    if why is not None:
        assert code.name in why
