"""Locating keys in TOML text, for error messages."""

from __future__ import annotations

from kimitui.profiles.tomlpos import find_key_line

TEXT = """\
# comment: tp_size = 1
name = "x"
extra_args = [
    "--a=1",
    "--b",
]
"quoted.key" = 1
sim.seed = 3   # dotted

[launcher] # the launcher
kind = "systemd"
[env]
NCCL_DEBUG = "INFO"
[sim]
fault = "hang"
inline = { a = 1 }
"""


def test_top_level_keys_and_comments() -> None:
    assert find_key_line(TEXT, ["name"]) == 2
    assert find_key_line(TEXT, ["tp_size"]) is None  # only in a comment


def test_list_items_point_at_the_list_key() -> None:
    assert find_key_line(TEXT, ["extra_args", 1]) == 3


def test_quoted_and_dotted_keys() -> None:
    assert find_key_line(TEXT, ["quoted.key"]) == 7
    assert find_key_line(TEXT, ["sim", "seed"]) == 8


def test_tables_and_their_keys() -> None:
    assert find_key_line(TEXT, ["launcher", "kind"]) == 11
    assert find_key_line(TEXT, ["launcher", "unit"]) == 10  # not set: the table header
    assert find_key_line(TEXT, ["env", "NCCL_DEBUG"]) == 13
    assert find_key_line(TEXT, ["sim", "fault"]) == 15
    assert find_key_line(TEXT, ["sim", "inline", "a"]) == 16
