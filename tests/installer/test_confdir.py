"""confdir.py: the runtime's pick, and strict reading."""

from __future__ import annotations

import os

import pytest

from cni_delguard.node import confdir


def test_pick_is_the_lexically_first_conf_like_libcni(tmp_path):
    for name in ("10-b.conflist", "05-a.json", "00-z.conf.bak", "01-x.conf.tmp", "README"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "00-dir.conf").mkdir()
    assert confdir.conf_files(str(tmp_path)) == ["05-a.json", "10-b.conflist"]
    assert confdir.pick(str(tmp_path), None) == str(tmp_path / "05-a.json")


@pytest.mark.parametrize(
    ("name", "why"),
    [
        pytest.param("../x.conf", "a file name in the conf dir", id="path"),
        pytest.param("x.yaml", "loads only", id="extension"),
        pytest.param("missing.conf", "does not exist", id="missing"),
    ],
)
def test_pick_refuses_bad_names(tmp_path, name, why):
    with pytest.raises((confdir.ConfError, confdir.NoConfError), match=why):
        confdir.pick(str(tmp_path), name)


def test_pick_in_an_empty_dir_says_so(tmp_path):
    with pytest.raises(confdir.NoConfError, match=r"no \.conf"):
        confdir.pick(str(tmp_path), None)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        pytest.param('{"type": "multus",', "not valid JSON", id="truncated"),
        pytest.param('{"type": "a", "type": "b"}', "duplicate key 'type'", id="duplicate-key"),
        pytest.param('{"mtu": NaN}', "NaN is not JSON", id="nan"),
        pytest.param("[1, 2]", "does not hold a JSON object", id="array"),
    ],
)
def test_parse_refuses_what_a_rewrite_would_not_keep(text, why):
    with pytest.raises(confdir.ConfError, match=why):
        confdir.parse("x.conf", text.encode())


def test_parse_refuses_non_utf8():
    with pytest.raises(confdir.ConfError, match="not UTF-8"):
        confdir.parse("x.conf", b'{"a": "\xff"}')


def test_read_refuses_a_symlink(tmp_path):
    (tmp_path / "real.conf").write_text("{}")
    os.symlink("real.conf", tmp_path / "00-link.conf")
    with pytest.raises(confdir.ConfError, match="symlink"):
        confdir.read(str(tmp_path / "00-link.conf"))


def test_render_keeps_key_order_and_ends_with_a_newline():
    assert confdir.render({"b": 1, "a": "é"}) == '{\n  "b": 1,\n  "a": "é"\n}\n'.encode()


@pytest.mark.parametrize(
    ("name", "conf", "found"),
    [
        pytest.param(
            "00-multus.conf",
            {"type": "multus", "name": "m", "cniVersion": "0.3.1"},
            ("multus", "multus thin (multus) in 00-multus.conf"),
            id="thin-conf",
        ),
        pytest.param(
            "00-multus.conflist",
            {"name": "m", "cniVersion": "1.0.0", "plugins": [{"type": "multus-shim"}]},
            ("multus-shim", "multus thick (multus-shim) in 00-multus.conflist"),
            id="thick-conflist",
        ),
        pytest.param(
            "00-multus.conf",
            {"type": "cni-delguard", "delegate": {"type": "multus-shim"}},
            ("multus-shim", "multus thick (multus-shim) in 00-multus.conf"),
            id="already-wrapped",
        ),
    ],
)
def test_detect_names_multus_thin_or_thick_in_either_form(name, conf, found):
    assert confdir.detect(f"/n/{name}", conf) == found


def test_detect_refuses_a_conf_without_multus_and_says_to_pass_wrap():
    conf = {"name": "b", "cniVersion": "1.0.0", "plugins": [{"type": "bridge"}]}
    with pytest.raises(confdir.WrapUnknownError, match=r"found no multus.*pass --wrap TYPE"):
        confdir.detect("/n/10-b.conflist", conf)


def test_multus_conflist_is_multus_own_not_a_master(tmp_path):
    """multus writes 00-multus.conflist when its master is cniVersion 1.0.0."""
    for name in ("00-multus.conflist", "10-calico.conflist"):
        (tmp_path / name).write_text("{}")
    assert confdir.multus_master(str(tmp_path)) == "10-calico.conflist"
