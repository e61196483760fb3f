"""Config: strict parsing, the lenient DEL peek, validation through pydantic, the verdict cache."""

from __future__ import annotations

import json
import os

import pytest

from cni_delguard.cni import errors
from cni_delguard.guard import config, defaults, models
from tests.support.confs import guard_conf
from tests.support.paths import widened_dir

WIDE = widened_dir()


def _conf(tmp_path, **extra):
    delegate = {"type": "bridge", "bridge": "cni0", "unknown": {"kept": True}}
    return guard_conf(delegate, state_dir=tmp_path / "state") | extra


def _defaults(root, **values):
    """Defaults of the test's own (under root): what the guard's are in the product."""
    return config.Defaults(
        state_dir=str(root / "d-state"),
        result_cache_dirs=(str(root / "d-results"),),
        multus_cache_dirs=(str(root / "d-multus"),),
        log_file=str(root / "d.log"),
        **values,
    )


@pytest.mark.parametrize(
    "data",
    [b"", b"{", b"[1]", b"null", b"[" * 100000 + b"]" * 100000],
    ids=["empty", "torn", "list", "null", "deeply-nested"],
)
def test_undecodable_stdin_is_code_6(data):
    with pytest.raises(errors.CniError) as exc:
        config.parse_json(data)
    assert exc.value.code == errors.DECODING_FAILURE


@pytest.mark.parametrize("version", ["0.1.0", "0.2.0", "1.2.0", "", None, 1])
def test_unsupported_versions_are_code_1(version):
    with pytest.raises(errors.CniError) as exc:
        config.check_version({"cniVersion": version})
    assert exc.value.code == errors.INCOMPATIBLE_VERSION


MALFORMED = {
    "name": "../x",
    "stateDir": "relative",
    "resultCacheDirs": "nope",
    "multusCacheDirs": ["/ok", 3],
    "logFile": 5,
    "logLevel": 3,
    "prevResult": [],
}


def test_peek_falls_back_to_defaults_for_anything_malformed():
    peek = config.Peek(MALFORMED)
    assert peek.network == ""
    assert peek.state_dir == defaults.STATE_DIR
    assert peek.result_cache_dirs == defaults.RESULT_CACHE_DIRS
    assert peek.multus_cache_dirs == defaults.MULTUS_CACHE_DIRS
    assert peek.log_file == defaults.LOG_FILE
    assert peek.log_level == defaults.LOG_LEVEL
    assert peek.prev_result is False


def test_peek_falls_back_to_the_defaults_it_is_given(tmp_path):
    peek = config.Peek(MALFORMED, dflt=_defaults(tmp_path, log_level="debug"))
    assert peek.state_dir == str(tmp_path / "d-state")
    assert peek.result_cache_dirs == (str(tmp_path / "d-results"),)
    assert peek.multus_cache_dirs == (str(tmp_path / "d-multus"),)
    assert (peek.log_file, peek.log_level) == (str(tmp_path / "d.log"), "debug")


def test_peek_reads_what_is_well_formed():
    peek = config.Peek(
        {
            "name": "net1",
            "stateDir": "/s/../t",
            "resultCacheDirs": ["/r", "rel"],
            "logFile": "",
            "prevResult": {"ips": []},
        }
    )
    assert (peek.network, peek.state_dir, peek.result_cache_dirs) == ("net1", "/t", ("/r",))
    assert peek.log_file == ""
    assert peek.prev_result is True


def test_defaults_are_filled_in(tmp_path):
    # no defaults given: the documented ones (README.md)
    s = config.load(_conf(tmp_path), cni_path=WIDE)
    assert s.network == "net1" and s.delegate_type == "bridge"
    assert s.timeouts == {"add": 240.0, "del": 120.0, "check": 120.0, "gc": 120.0, "status": 120.0}
    assert s.result_cache_dirs == ("/var/lib/cni/results",)
    assert s.multus_cache_dirs == ("/var/lib/cni/multus",)
    assert s.log_file == "/var/log/cni-delguard/delguard.log"
    assert (s.lock_timeout, s.log_level) == (10.0, "info")


def test_the_defaults_given_are_the_ones_filled_in(tmp_path):
    """Two sets of defaults in one process, one config, one state dir: each load gets its own
    (none is fixed in the model at import, and the stored verdict is keyed by them too)."""
    conf = _conf(tmp_path, timeouts={"del": 5})
    first = config.load(conf, WIDE, dflt=_defaults(tmp_path / "a", timeouts={"add": 7},
                                                   lock_timeout=2))
    second = config.load(conf, dflt=_defaults(tmp_path / "b", log_level="error"), cni_path=WIDE)
    assert first.log_file == str(tmp_path / "a" / "d.log")
    assert first.result_cache_dirs == (str(tmp_path / "a" / "d-results"),)
    assert first.timeouts == dict(defaults.TIMEOUTS, add=7.0, **{"del": 5.0})
    assert (first.lock_timeout, first.log_level) == (2.0, "info")
    assert second.log_file == str(tmp_path / "b" / "d.log")
    assert second.multus_cache_dirs == (str(tmp_path / "b" / "d-multus"),)
    assert second.timeouts == dict(defaults.TIMEOUTS, **{"del": 5.0})
    assert (second.lock_timeout, second.log_level) == (defaults.LOCK_TIMEOUT, "error")
    assert len(os.listdir(tmp_path / "state" / "verdicts")) == 2
    # ...and the same defaults again read the stored verdict: equal values, equal key.
    again = _defaults(tmp_path / "a", timeouts={"add": 7}, lock_timeout=2)
    same = _defaults(tmp_path / "a", timeouts={"add": 7}, lock_timeout=2)
    assert config.digest(conf, dflt=again) == config.digest(conf, dflt=same)
    assert config.load(conf, WIDE, dflt=again).log_file == first.log_file
    assert len(os.listdir(tmp_path / "state" / "verdicts")) == 2


def test_a_config_without_state_dir_keeps_its_verdict_in_the_default_one(tmp_path):
    conf = {k: v for k, v in _conf(tmp_path).items() if k != "stateDir"}
    s = config.load(conf, dflt=_defaults(tmp_path), cni_path=WIDE)
    assert s.state_dir == str(tmp_path / "d-state")
    assert os.listdir(tmp_path / "d-state" / "verdicts") == [
        config.digest(conf, dflt=_defaults(tmp_path)) + ".json"
    ]


@pytest.mark.parametrize(
    ("extra", "where"),
    [
        pytest.param({"stateDir": "rel"}, "stateDir", id="relative-state-dir"),
        pytest.param({"timeouts": {"add": -1}}, "timeouts.add", id="negative-timeout"),
        pytest.param({"timeouts": {"ad": 1}}, "timeouts.ad", id="unknown-timeout"),
        pytest.param({"lockTimeout": "10"}, "lockTimeout", id="string-number"),
        pytest.param({"logLevel": "loud"}, "logLevel", id="log-level"),
        pytest.param({"name": "a/b"}, "name", id="network-name"),
        pytest.param({"delegate": {"type": "../bin/sh"}}, "delegate.type", id="delegate-path"),
        pytest.param({"delegate": {"type": "cni-delguard"}}, "delegate.type", id="self-delegation"),
        pytest.param({"delegate": {}}, "delegate.type", id="no-delegate-type"),
        pytest.param({"resultCacheDirs": ["/ok", "rel"]}, "resultCacheDirs.1", id="cache-dir"),
        pytest.param({"type": "other"}, "type", id="wrong-type"),
    ],
)
def test_invalid_configs_are_code_7_with_the_field_named(tmp_path, extra, where):
    with pytest.raises(errors.CniError) as exc:
        config.load(_conf(tmp_path, **extra), cni_path=WIDE)
    assert exc.value.code == errors.INVALID_CONFIG
    assert where in exc.value.details


def test_a_verdict_is_stored_and_trusted_by_later_execs(tmp_path, monkeypatch):
    conf = _conf(tmp_path, timeouts={"del": 5})
    first = config.load(conf, cni_path=WIDE)
    verdicts = os.listdir(tmp_path / "state" / "verdicts")
    assert verdicts == [config.digest(conf) + ".json"]

    def no_pydantic(_conf, _dflt):
        raise AssertionError("validated again despite a stored verdict")

    monkeypatch.setattr(models, "validate", no_pydantic)
    # The per-call keys do not change the digest...
    again = config.load(dict(conf, runtimeConfig={"portMappings": []}, prevResult={"ips": []}),
                        WIDE)
    assert again.timeouts == first.timeouts == dict(first.timeouts, **{"del": 5.0})
    # ...but any other change does.
    with pytest.raises(AssertionError, match="validated again"):
        config.load(dict(conf, lockTimeout=3), cni_path=WIDE)


def test_per_call_keys_are_still_checked_with_a_stored_verdict(tmp_path):
    conf = _conf(tmp_path)
    config.load(conf, cni_path=WIDE)
    for bad in ({"runtimeConfig": []}, {"prevResult": "x"}):
        with pytest.raises(errors.CniError) as exc:
            config.load(dict(conf, **bad), cni_path=WIDE)
        assert exc.value.code == errors.INVALID_CONFIG


def test_an_unreadable_state_dir_only_costs_the_cache(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    s = config.load(_conf(tmp_path, stateDir=str(blocker / "state")), cni_path=WIDE)
    assert s.network == "net1"


def test_validate_plugin_conf_takes_the_lists_name_and_version(tmp_path):
    plugin = {"type": "cni-delguard", "delegate": {"type": "multus"}}
    s = config.validate_plugin_conf(plugin, "multus-cni-network", "0.3.1")
    assert (s.network, s.cni_version, s.delegate_type) == ("multus-cni-network", "0.3.1", "multus")
    assert s.state_dir == defaults.STATE_DIR
    given = config.validate_plugin_conf(plugin, "n", "1.0.0", dflt=_defaults(tmp_path))
    assert given.state_dir == str(tmp_path / "d-state")
    with pytest.raises(errors.CniError):
        config.validate_plugin_conf(plugin, "multus-cni-network", "0.2.0")


def test_digest_ignores_key_order(tmp_path):
    conf = _conf(tmp_path)
    assert config.digest(conf) == config.digest(json.loads(json.dumps(conf, sort_keys=True)))


def _levels(depth: int) -> bytes:
    inner = b"[" * (depth - 2) + b"]" * (depth - 2)
    return b'{"cniVersion": "1.0.0", "name": "n", "x": {"y": ' + inner + b"}}"


@pytest.mark.parametrize(
    "depth",
    [pytest.param(d, id=f"depth-{d}") for d in (501, 502, 900, 986, 987, 988, 989, 990, 5000)],
)
def test_a_config_nested_past_the_bound_is_code_6_never_999(depth):
    """On 58a9769 a config 987 to 989 levels deep parsed, then the digest's re-encoding hit
    RecursionError: code 999. Now a config deeper than MAX_NESTING is refused where it is
    parsed."""
    data = _levels(depth)
    with pytest.raises(errors.CniError) as exc:
        config.parse_json(data)
    assert exc.value.code == errors.DECODING_FAILURE


@pytest.mark.parametrize("depth", [pytest.param(d, id=f"depth-{d}") for d in (3, 499, 500)])
def test_a_config_within_the_bound_parses(depth):
    assert config.nesting(config.parse_json(_levels(depth))) == depth


def test_nesting_stops_counting_past_the_bound():
    assert config.nesting(json.loads(_levels(600))) == config.MAX_NESTING + 1


def test_a_missing_state_dir_is_made_only_where_the_guard_may(tmp_path):
    """A leaf in a place the admin named (the tests' temp dir) is made by the ADD that follows;
    a missing dir above it never: code 7 before anything is created."""
    leaf = config.load(_conf(tmp_path, stateDir=str(tmp_path / "leaf")), WIDE)
    assert leaf.make_state_dir
    assert not config.load(_conf(tmp_path, stateDir=str(tmp_path)), WIDE).make_state_dir
    with pytest.raises(errors.CniError) as exc:
        config.load(_conf(tmp_path, stateDir=str(tmp_path / "a" / "b" / "state")), WIDE)
    assert exc.value.code == errors.INVALID_CONFIG
    assert "does not exist" in exc.value.msg
    assert not (tmp_path / "a").exists()


def test_a_missing_dir_under_a_built_in_prefix_is_not_made(tmp_path):
    """/var/lib/<missing> named by a config: walked (read only), refused with code 7."""
    name = f"cni-delguard-test-missing-{os.getpid()}"
    for key, value in (("stateDir", f"/var/lib/{name}"), ("logFile", f"/var/log/{name}/x.log")):
        with pytest.raises(errors.CniError) as exc:
            config.load(_conf(tmp_path, **{key: value}), WIDE)
        assert exc.value.code == errors.INVALID_CONFIG, key
        assert "does not exist" in exc.value.msg, key
    assert not os.path.exists(f"/var/lib/{name}") and not os.path.exists(f"/var/log/{name}")


def _remove_chain(top):
    """Remove a chain of nested dirs without recursion (shutil.rmtree, and pytest's cleanup of
    its temp dirs, recurse once per level): what a guard that made them would leave."""
    if not top.is_dir():
        return
    here = os.getcwd()
    os.chdir(top)
    depth = 0
    try:
        while True:
            subs = [e for e in os.listdir(".") if os.path.isdir(e) and not os.path.islink(e)]
            for e in set(os.listdir(".")) - set(subs):
                os.unlink(e)
            if subs:
                os.chdir(subs[0])
                depth += 1
                continue
            if depth == 0:
                break
            os.chdir("..")
            depth -= 1
            for e in os.listdir("."):
                if os.path.isdir(e) and not os.path.islink(e):
                    os.rmdir(e)
    finally:
        os.chdir(here)
    top.rmdir()


@pytest.mark.parametrize(
    "components", [pytest.param(n, id=f"{n}-components") for n in (33, 3000, 20000)]
)
def test_a_state_dir_past_the_depth_bound_is_code_7_and_makes_nothing(tmp_path, components):
    """On 58a9769 a `stateDir` of 3000 components left 3004 dirs behind (code 5), made by a
    walk that rebuilt the path at each component (20000: minutes)."""
    deep = str(tmp_path / "/".join(["d"] * components))
    try:
        with pytest.raises(errors.CniError) as exc:
            config.load(_conf(tmp_path, stateDir=deep), WIDE)
        assert exc.value.code == errors.INVALID_CONFIG
        assert not (tmp_path / "d").exists()
    finally:
        _remove_chain(tmp_path / "d")
