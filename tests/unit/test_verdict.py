"""The verdict cache is no trust boundary (cni_delguard/guard/verdict.py, fields.py): a stored
verdict spares pydantic only when it is root's own and says exactly what the config says."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cni_delguard.cni import errors
from cni_delguard.guard import config, defaults, models
from tests.support.confs import guard_conf
from tests.support.paths import widened_dir

WIDE = widened_dir()


def _conf(tmp_path: Path, **extra: object) -> dict[str, object]:
    return guard_conf({"type": "bridge", "capabilities": {"portMappings": True}},
                      state_dir=tmp_path / "state") | extra


def _stored(tmp_path: Path, conf: dict[str, object]) -> Path:
    return tmp_path / "state" / "verdicts" / (config.digest(conf) + ".json")


def _no_pydantic(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = models.validate

    def counted(conf: dict[str, object], filled: dict[str, object]) -> dict[str, object]:
        calls.append(1)
        return real(conf, filled)

    monkeypatch.setattr(models, "validate", counted)
    return calls


REWRITES = {
    "network-climbs": {"network": "../../etc"},
    "network-other": {"network": "net2"},
    "state-dir-elsewhere": {"stateDir": "/etc"},
    "log-file-elsewhere": {"logFile": "/etc/profile.d/x.sh"},
    "delegate-type": {"delegateType": "sh"},
    "delegate-capabilities": {"delegateCapabilities": ["portMappings", "ips"]},
    "timeout-out-of-range": {"timeouts": {"add": 1e9, "del": 1, "check": 1, "gc": 1, "status": 1}},
    "lock-timeout-bool": {"lockTimeout": True},
    "mode": {"mode": "observe"},
    "log-level": {"logLevel": "loud"},
    "extra-key": {"surprise": 1},
}


@pytest.mark.parametrize("rewrite", [pytest.param(v, id=k) for k, v in REWRITES.items()])
def test_a_rewritten_verdict_is_ignored_and_validated_afresh(tmp_path, monkeypatch, rewrite):
    """On 58a9769 the settings were the file's: a verdict whose `network` held `../` made the
    marker store open a dir outside `networks`, and `stateDir` moved markers and locks anywhere.
    Now the file counts only when it says exactly what the config says."""
    conf = _conf(tmp_path)
    own = config.load(conf, WIDE)
    path = _stored(tmp_path, conf)
    body = json.loads(path.read_text()) | rewrite
    path.write_text(json.dumps(body))
    calls = _no_pydantic(monkeypatch)
    again = config.load(conf, WIDE)
    keys = [k for k in own.__slots__ if k != "make_state_dir"]  # made by the first load
    assert [getattr(again, k) for k in keys] == [getattr(own, k) for k in keys]
    assert calls == [1], "the rewritten verdict was taken without validating the config"
    assert json.loads(path.read_text()) != body, "the forged verdict was not written over"


def _hard_link(path: Path) -> None:
    os.link(path, path.with_name("second-name"))


def _symlink(path: Path) -> None:
    real = path.with_name("real")
    path.rename(real)
    path.symlink_to(real)


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda p: p.chmod(0o666), id="writable-by-others"),
        pytest.param(lambda p: p.chmod(0o620), id="writable-by-group"),
        pytest.param(lambda p: os.chown(p, 65534, 65534), id="not-roots"),
        pytest.param(_hard_link, id="hard-linked"),
        pytest.param(_symlink, id="symlink"),
        pytest.param(lambda p: p.parent.chmod(0o777), id="dir-writable-by-others"),
    ],
)
def test_a_verdict_that_is_not_roots_own_is_not_used(tmp_path, monkeypatch, spoil):
    conf = _conf(tmp_path)
    config.load(conf, WIDE)
    spoil(_stored(tmp_path, conf))
    calls = _no_pydantic(monkeypatch)
    config.load(conf, WIDE)
    assert calls == [1]


def test_roots_own_exact_verdict_spares_pydantic(tmp_path, monkeypatch):
    conf = _conf(tmp_path, timeouts={"del": 5}, lockTimeout=3, mode="observe")
    config.load(conf, WIDE)
    calls = _no_pydantic(monkeypatch)
    s = config.load(conf, WIDE)
    assert calls == []
    assert (s.timeouts["del"], s.lock_timeout, s.mode) == (5.0, 3.0, "observe")


def test_a_verdict_planted_for_an_invalid_config_does_not_make_it_valid(tmp_path):
    """The digest of a config the schema refuses, with a verdict of that config's own fields:
    the field rules still refuse it (code 7 from the schema, as without a verdict)."""
    from cni_delguard.guard import fields

    conf = _conf(tmp_path, lockTimeout=0)
    filled = config.Defaults().conf()
    body = fields.settings(_conf(tmp_path), filled) | {"lockTimeout": 0.0}
    verdicts = tmp_path / "state" / "verdicts"
    verdicts.mkdir(parents=True, mode=0o700)
    path = _stored(tmp_path, conf)
    path.write_text(json.dumps(body))
    path.chmod(0o600)
    with pytest.raises(errors.CniError) as exc:
        config.load(conf, WIDE)
    assert exc.value.code == errors.INVALID_CONFIG


VALID = {
    "minimal": {},
    "every-key": {
        "stateDir": "/var/lib/cni/x/../delguard/",
        "logFile": "/var/log/cni-delguard//d.log",
        "resultCacheDirs": ["/var/lib/cni/results", "/a/./b"],
        "multusCacheDirs": [],
        "timeouts": {"add": 1, "del": 2.5, "status": 3600},
        "lockTimeout": 1,
        "logLevel": "debug",
        "mode": "observe",
        "capabilities": {"portMappings": True},
        "runtimeConfig": {"x": 1},
        "prevResult": {"ips": []},
    },
    "log-off": {"logFile": ""},
    "prev-result-null": {"prevResult": None},
}


@pytest.mark.parametrize("extra", [pytest.param(v, id=k) for k, v in VALID.items()])
def test_the_field_rules_give_what_the_schema_gives(tmp_path, extra):
    """fields.settings and models.validate agree on valid configs (else no verdict would ever
    be used again: the cost, not the safety, of a disagreement)."""
    from cni_delguard.guard import fields

    conf = guard_conf({"type": "multus", "capabilities": {"b": False, "a": True}}) | extra
    filled = config.Defaults().conf()
    assert fields.settings(conf, filled) == models.validate(conf, filled)


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param({"lockTimeout": True}, id="bool-seconds"),
        pytest.param({"timeouts": {"add": 0}}, id="zero-timeout"),
        pytest.param({"timeouts": {"ad": 1}}, id="unknown-timeout"),
        pytest.param({"stateDir": "rel"}, id="relative"),
        pytest.param({"name": "../x"}, id="network"),
        pytest.param({"delegate": {"type": "a/b"}}, id="delegate-path"),
        pytest.param({"delegate": {"type": "x", "capabilities": {"a": 1}}}, id="capability"),
        pytest.param({"type": "other"}, id="type"),
        pytest.param({"mode": None}, id="mode"),
        pytest.param({"runtimeConfig": []}, id="runtime-config"),
    ],
)
def test_the_field_rules_refuse_what_the_schema_refuses(extra):
    from cni_delguard.guard import fields

    conf = guard_conf({"type": "multus"}) | extra
    filled = config.Defaults().conf()
    with pytest.raises(fields.FieldError):
        fields.settings(conf, filled)
    with pytest.raises(errors.CniError):
        models.validate(conf, filled)


def test_the_defaults_state_dir_is_the_built_in_one():
    assert config.Defaults().state_dir == defaults.STATE_DIR
