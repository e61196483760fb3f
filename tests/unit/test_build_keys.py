"""delguard_build/keys.py: docs/configuration.md's keys table is the config model's keys, each
with its default and a meaning, and refuses to render when the model and the meanings part."""

from __future__ import annotations

import pytest

from cni_delguard.guard import models
from delguard_build import keys


def test_every_guard_key_of_the_model_has_one_row() -> None:
    rows = [line for line in keys.table().splitlines() if line.startswith("| `")]
    named = [row.split("`")[1] for row in rows]
    assert named == [k for k in models.GuardConf.model_fields if k not in keys.CNI_KEYS]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        pytest.param(lambda m: {k: v for k, v in m.items() if k != "mode"}, "no meaning for",
                     id="key-without-meaning"),
        pytest.param(lambda m: {**m, "retired": "gone"}, "no key for", id="meaning-without-key"),
    ],
)
def test_model_and_meanings_that_part_stop_the_render(monkeypatch: pytest.MonkeyPatch, change,
                                                      why: str) -> None:
    meanings = keys.meanings()
    monkeypatch.setattr(keys, "meanings", lambda: change(meanings))
    with pytest.raises(keys.KeysError, match=why):
        keys.table()


@pytest.mark.parametrize(
    "page",
    [
        pytest.param("no markers\n", id="none"),
        pytest.param(f"{keys.END}\n{keys.BEGIN}\n", id="out-of-order"),
        pytest.param(f"{keys.BEGIN}\n{keys.BEGIN}\n{keys.END}\n", id="twice"),
    ],
)
def test_a_page_without_its_markers_is_refused(page: str) -> None:
    with pytest.raises(keys.KeysError, match="keys:begin"):
        keys.rendered(page)


def test_the_table_goes_between_the_markers_and_nothing_else_changes() -> None:
    page = f"before\n{keys.BEGIN}\nold\n{keys.END}\nafter\n"
    assert keys.rendered(page) == f"before\n{keys.BEGIN}\n{keys.table()}{keys.END}\nafter\n"
