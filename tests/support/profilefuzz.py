"""Fuzz cases for profile files (issue 13: bad input is a clear error, never a crash).

A case is the text of one profile file: a real shipped profile mutated (lines dropped, duplicated
or cut, values swapped for odd ones: long strings, paths, wrong types, unicode, deep tables), or
arbitrary bytes.  The runner writes it into a private profile folder beside the real profiles and
loads it the way ``kimitui profiles list/show/lint/swap`` do; the only acceptable failure is a
:class:`~kimitui.profiles.errors.ProfileError` that names the file.
"""

from __future__ import annotations

import atexit
import functools
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from kimitui.profiles import ProfileError, load_profile_file, scan_profiles
from kimitui.profiles.loader import shipped_dir

_SHIPPED = sorted(shipped_dir().glob("*.toml"))
_TEXTS = [p.read_text() for p in _SHIPPED]
_ODD_VALUES = [
    '"' + "x" * 300 + '"', '"../../../../etc/hostname"', '"/etc/passwd"', '"ep8-tuned/../tp8"', "1e400",
    "-1", "99999999999999999999999", "true", "[1, [2, [3]]]", '{a = {b = {c = 1}}}', '"\\u0000"', '"é日本🙂"',
    '""', "nan", "inf", '"' + "ep8-tuned" * 40 + '"', "[]", '"ep8-tuned"', '"tp8"', '"9"', "0", '"key"',
]
_ODD_KEYS = ["extends", "name", "key", "port", "host", "tp_size", "ep_size", "model_path", "env", "extra_args",
             "[sim]", "[env]", "enable_eplb", "x" * 80]


def profile_case(rng: random.Random) -> str:
    """One mutated profile file's text."""
    if rng.random() < 0.05:
        return "".join(chr(rng.randrange(1, 0x2FF)) for _ in range(rng.randrange(0, 200)))
    lines = rng.choice(_TEXTS).splitlines()
    for _ in range(rng.randrange(1, 5)):
        op = rng.randrange(6)
        i = rng.randrange(len(lines) + 1)
        if op == 0 and lines:
            del lines[min(i, len(lines) - 1)]
        elif op == 1 and lines:
            lines.insert(i, rng.choice(lines))
        elif op == 2:
            lines.insert(i, f"{rng.choice(_ODD_KEYS).strip('[]')} = {rng.choice(_ODD_VALUES)}")
        elif op == 3 and lines:
            j = min(i, len(lines) - 1)
            lines[j] = lines[j][: rng.randrange(len(lines[j]) + 1)]
        elif op == 4:
            lines.insert(0, f"extends = {rng.choice(_ODD_VALUES)}")
        else:
            lines.insert(i, rng.choice(["[sim]", "[env]", "[[x]]", "[a.b.c]", "="]))
    return "\n".join(lines) + "\n"


def profile_runner(check_listing: bool = True) -> Callable[[str], None]:
    """Load the case as ``fuzz.toml`` in a private folder on the search path; only a ProfileError may come out.

    ``check_listing``: also list every profile with the case beside them (what ``profiles list`` does)."""
    folder = Path(tempfile.mkdtemp(prefix="kimitui-profile-fuzz-"))
    atexit.register(functools.partial(shutil.rmtree, folder, ignore_errors=True))
    path = folder / "fuzz.toml"

    def run(text: str) -> None:
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            load_profile_file(path, [folder])
        except ProfileError as exc:
            if str(path) not in str(exc) and path.name not in str(exc):
                raise AssertionError(f"a profile error that does not name the file: {exc}") from exc
        if not check_listing:
            return
        good, bad = scan_profiles([folder])  # one broken profile never breaks listing the others
        if len(good) + len(bad) < len(_SHIPPED):
            raise AssertionError(f"the listing lost profiles: {len(good)} good, {len(bad)} bad")

    return run
