"""Stable profile keys (issue 13): declared, from the config's order, remembered; adding one moves none."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from kimitui.cli import main
from kimitui.config import ConfigError, parse_config
from kimitui.profiles import ProfileError, load_profile, scan_profiles
from kimitui.profiles.keys import assign_keys, load_memory, stable_keys


@pytest.fixture
def pdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """One profile directory on the search path (no shipped profiles); state and config in tmp_path."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("KIMITUI_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("KIMITUI_PROFILES", raising=False)
    monkeypatch.delenv("KIMITUI_CONFIG", raising=False)
    (tmp_path / "none").mkdir()
    monkeypatch.setattr("kimitui.profiles.loader.shipped_dir", lambda: tmp_path / "none")
    d = tmp_path / "profiles"
    d.mkdir()
    return d


def write(d: Path, name: str, extra: str = "") -> Path:
    path = d / f"{name}.toml"
    path.write_text(f'name = "{name}"\nmodel_path = "/models/k2"\n{extra}')
    return path


def test_the_rule_declared_then_config_order_then_remembered_then_lowest_free():
    got = assign_keys({"a": None, "b": "2", "c": None, "d": None}, order=["d"], remembered={"c": "4"})
    assert got.by_key == {"1": "d", "2": "b", "3": "a", "4": "c"}
    # a config entry on a declared key is not honoured, and said
    got = assign_keys({"a": "1", "b": None}, order=["b"])
    assert got.by_key == {"1": "a", "2": "b"} and "b on key 1, but a declares key 1" in got.notes[0]
    # the operator's own say (declared, config order) beats a key merely remembered
    got = assign_keys({"new": "1", "old": None, "cfg": None}, order=["absent", "cfg"],
                      remembered={"old": "1", "cfg": "5"})
    assert got.by_key == {"1": "new", "2": "cfg", "3": "old"}
    # nine keys at most; the rest are palette-only
    assert len(assign_keys({f"p{i:02}": None for i in range(12)}).by_key) == 9


def test_adding_profiles_in_any_order_never_moves_a_key(tmp_path: Path):
    """The issue's promise, tried over many orders of arrival (alphabetical keys fail this at once)."""
    rng = random.Random(13)
    for trial in range(50):
        names = [f"ep{rng.randrange(1000):03}-{i}" for i in range(9)]
        memory = tmp_path / f"keys-{trial}.json"
        present: list[str] = []
        keys: dict[str, str] = {}
        for name in names:
            present.append(name)
            result = stable_keys_by_name(present, memory)
            for old, k in keys.items():
                assert result[old] == k, f"adding {name} moved {old}"
            keys = result
        assert sorted(keys.values()) == list("123456789")


def stable_keys_by_name(names: list[str], memory: Path) -> dict[str, str]:
    from kimitui.profiles.schema import Profile

    profiles = [Profile(name=n, model_path="/m") for n in names]
    return {n: k for k, n in stable_keys(profiles, path=memory).by_key.items()}


def test_a_removed_profile_keeps_its_key_free_while_others_are_free(tmp_path: Path):
    memory = tmp_path / "keys.json"
    assert stable_keys_by_name(["a", "b", "c"], memory) == {"a": "1", "b": "2", "c": "3"}
    assert stable_keys_by_name(["a", "c", "d"], memory) == {"a": "1", "c": "3", "d": "4"}  # b away: 2 stays its
    assert stable_keys_by_name(["a", "b", "c", "d"], memory)["b"] == "2"  # and it is back on it
    assert load_memory(memory) == {"a": "1", "b": "2", "c": "3", "d": "4"}


@pytest.mark.parametrize("value", ['"0"', "10", '"a"', "true", '"1 "'])
def test_a_bad_key_is_an_error_at_its_line(pdir: Path, value: str):
    write(pdir, "bad", f'description = "x"\nkey = {value}\n')
    with pytest.raises(ProfileError) as err:
        load_profile("bad")
    assert str(err.value).startswith(f"{pdir / 'bad.toml'}:4: key: key must be one of 1-9")


def test_a_key_is_a_string_or_a_number_and_is_not_inherited(pdir: Path):
    write(pdir, "base", "key = 3\n")
    write(pdir, "child", 'extends = "base"\nenable_eplb = true\n')
    assert load_profile("base").key == "3"
    assert load_profile("child").key is None, "a variant of a keyed profile must not clash with it"
    assert "key" not in load_profile("base").knobs()


def test_two_profiles_on_one_key_is_an_error_naming_both_files_and_lines(pdir: Path):
    a = write(pdir, "ep8-tuned", 'key = "3"\n')
    b = write(pdir, "ep8-v2", 'description = "two knobs"\nkey = "3"\n')
    good, bad = scan_profiles()
    assert {p.name for p in good} == {"ep8-tuned", "ep8-v2"}, "both stay usable by name"
    assert [str(e) for e in bad] == [f"{b}:4: key: key 3 is also declared by ep8-tuned ({a}:3); "
                                     "a key belongs to one profile"]
    # the one that held the key before keeps it; the other falls back to a free key
    assert assign_keys(good, remembered={"ep8-v2": "3"}).by_key == {"1": "ep8-tuned", "3": "ep8-v2"}
    assert assign_keys(good).by_key == {"3": "ep8-tuned", "1": "ep8-v2"}


def test_config_order_is_validated():
    assert parse_config('[profiles]\norder = ["ep8-tuned", "ep8-eplb"]\n').profiles.order == ["ep8-tuned", "ep8-eplb"]
    for text, msg in [('[profiles]\norder = ["a", "b", "a"]\n', "c.toml:2: profiles.order: a listed more than once"),
                      ('[profiles]\norder = ["../x"]\n', "c.toml:2: profiles.order: '../x' is not a profile name"),
                      ('[profiles]\nordre = []\n', "c.toml:2: profiles.ordre: unknown field"),
                      ("[profiles]\norder = [" + ", ".join(f'"p{i}"' for i in range(10)) + "]\n",
                       "c.toml:2: profiles.order: List should have at most 9 items")]:
        with pytest.raises(ConfigError) as err:
            parse_config(text, "c.toml")
        assert str(err.value).startswith(msg), str(err.value)


def _list(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, list[list[str]], str]:
    code = main([*extra, "profiles", "list"])
    out, err = capsys.readouterr()
    # a pipe gets a line per profile under a header line (issue 32), then where they came from
    rows = [line.split() for line in out.splitlines()[1:] if not line.startswith(("from:", "searched:"))]
    return code, [r for r in rows if len(r) > 1], err


def test_profiles_list_shows_each_key_and_a_new_profile_moves_none(pdir: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]):
    write(pdir, "tp8")
    write(pdir, "ep8-tuned")
    write(pdir, "ep8", 'key = "9"\n')
    cfg = tmp_path / "config.toml"
    cfg.write_text('[profiles]\norder = ["tp8"]\n')
    code, rows, _ = _list(capsys, "--config", str(cfg))
    assert code == 0
    assert [(r[0], r[1]) for r in rows] == [("1", "tp8"), ("2", "ep8-tuned"), ("9", "ep8")]
    write(pdir, "ep4")  # sorts before ep8-tuned
    code, rows, _ = _list(capsys, "--config", str(cfg))
    assert [(r[0], r[1]) for r in rows] == [("1", "tp8"), ("2", "ep8-tuned"), ("3", "ep4"), ("9", "ep8")]
    assert json.loads((tmp_path / "state" / "profile-keys.json").read_text())["ep4"] == "3"


def test_profiles_list_reports_a_key_clash_and_exits_2(pdir: Path, capsys: pytest.CaptureFixture[str]):
    write(pdir, "a", 'key = "2"\n')
    write(pdir, "b", 'key = "2"\n')
    code, rows, err = _list(capsys)
    assert code == 2
    assert "key 2 is also declared by a" in err and "b.toml:3" in err
    assert {(r[0], r[1]) for r in rows} == {("2", "a"), ("1", "b")}


def test_profiles_show_names_the_cockpit_key(pdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    write(pdir, "tp8", 'key = "4"\n')
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    write(outside, "tp8")
    assert main(["profiles", "show", "tp8"]) == 0
    assert "cockpit key: 4" in capsys.readouterr().out
    assert main(["profiles", "show", str(outside / "tp8.toml")]) == 0
    assert "cockpit key: none" in capsys.readouterr().out, "a file outside the search path is on no key"


def test_the_shipped_profiles_keep_the_keys_they_had_before_the_drafters(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The nine seed profiles filled keys 1-9 in name order.  The drafters came with every key taken: ep8-dflash
    declares key 2, the one profile that gives its key up is ep8 (the untuned EP8, superseded by ep8-tuned on 7);
    ep8-eagle3 and ep8 are in the palette.  Every other key stays where it was, on a fresh machine and on one that
    remembers the old keys (declared keys beat remembered ones, docs/keys.md)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KIMITUI_PROFILES", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    good, bad = scan_profiles()
    assert bad == []
    before = {"1": "ep4", "2": "ep8", "3": "ep8-cont16", "4": "ep8-cont4", "5": "ep8-dense-tp1", "6": "ep8-eplb",
              "7": "ep8-tuned", "8": "ep8-v2", "9": "tp8"}
    now = {**before, "2": "ep8-dflash"}
    assert assign_keys(good).by_key == now
    assert assign_keys(good, remembered={n: k for k, n in before.items()}).by_key == now
    # the deployments (issue 20) came after every key was taken: in the palette
    assert {p.name for p in good} - set(now.values()) == {"ep8", "ep8-eagle3", "ep16-2node", "pd-1p1d"}
