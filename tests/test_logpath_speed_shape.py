"""Issue 33: the log path's shortcuts give exactly what the long way gives (correctness only, no timing here).

A line becomes its event without pydantic's validation (:meth:`LogLine.from_parser`), the commonest lines
are read whole in one match (:func:`batch_line`, the access line), a long message is searched for its
problem and startup words by compiled literals, and a few patterns no longer backtrack.  Each must give the
same event, the same fields in the same order (a recording writes them in that order), as the step-by-step
path, the validated model and the old patterns.
"""

from __future__ import annotations

import json
import random
import re

import pytest

from kimitui.events import LogLine, dump_event
from kimitui.sglang.log import parse_line, to_event
from kimitui.sglang.log.batch import batch_line
from kimitui.sglang.log.parse import _parse, _parse_steps
from kimitui.sglang.log.prefix import clean
from kimitui.sglang.log.problems import _PROBLEMS, problem
from kimitui.sglang.log.startup import _ARG, _TIMING, _TIMING_GROUP, READY_TEXT
from kimitui.sglang.log.values import _KV_EQ, RESERVED, finder, kv_pairs, value
from tests.support.fuzzcases import log_case
from tests.support.logsamples import ACCESS, ALL, DECODE, PREFILL, STARTUP, realistic_mix

GOLDEN = [g[0] for g in ALL]


def _ordered(fields: dict) -> str:
    return json.dumps(fields)  # keeps the order: a recording's bytes


def _variants(line: str) -> list[str]:
    """The line, and the same line bent where a shortcut could part from the long way."""
    out = [line, line + ", ", line.replace("TP0", "TP0 EP0"), line.replace("64", "٦٤"), line.replace(", ", ",  ", 1),
           line.replace("] ", "]", 1), line.replace(" batch,", " batch [7],"), line.replace(" batch,", " batch."),
           line + "x" * 120, "\x1b[32m" + line + "\x1b[0m", line.replace("0.03", "0.03e5")]
    return out


@pytest.mark.parametrize("line", [g[0] for g in DECODE + PREFILL + ACCESS])
def test_a_line_read_whole_has_the_fields_the_step_by_step_path_gives(line: str) -> None:
    for variant in _variants(line):
        whole, steps = _parse(variant), _parse_steps(clean(variant))
        assert whole[:2] == steps[:2], variant
        assert _ordered(whole[2]) == _ordered(steps[2]), variant


def test_the_usual_decode_and_prefill_lines_do_take_the_shortcut() -> None:
    """Else the test above compares the long way with itself."""
    usual = [g[0] for g in DECODE[5:7] + PREFILL[2:]]
    assert all(batch_line(line) is not None for line in usual)
    assert batch_line(DECODE[5][0].replace("64", "٦٤")) is None  # other digits: the long way
    assert batch_line(DECODE[5][0] + " " * 300) is None  # past NUM_CHARS: the long way bounds it


def test_mutated_lines_parse_the_same_whole_or_step_by_step() -> None:
    rng = random.Random(33)
    for _ in range(3000):
        raw = log_case(rng)[:4000]
        whole, steps = _parse(raw), _parse_steps(clean(raw))
        assert (whole[:2], _ordered(whole[2])) == (steps[:2], _ordered(steps[2])), raw[:200]


def _validated(line: str, *, host: str, source: str, cursor: str, t: float) -> LogLine:
    """The event as it was built before issue 33: the parse, then the validated model."""
    parsed = parse_line(line.rstrip("\r\n"))
    raw = to_event(line, host=host, source=source, cursor=cursor, t=t).raw
    return LogLine(t=t, host=host, raw=raw, line_kind=parsed.line_kind, severity=parsed.severity,
                   fields=parsed.fields, source=source, cursor=cursor)


@pytest.mark.parametrize("line", sorted(set(realistic_mix()) | set(GOLDEN)))
def test_an_event_built_without_validation_is_the_validated_one(line: str) -> None:
    ev = to_event(line, host="h", source="s", cursor="12", t=1.5)
    want = _validated(line, host="h", source="s", cursor="12", t=1.5)
    assert ev == want
    assert list(ev.__dict__.items()) == list(want.__dict__.items())
    assert ev.model_fields_set == want.model_fields_set
    assert dump_event(ev) == dump_event(want)
    assert ev.model_copy(update={"node": "n"}).node == "n" and ev.node is None


def test_each_event_has_its_own_fields_and_an_int_time_becomes_a_float() -> None:
    line = DECODE[5][0]
    a, b = to_event(line, host="h", source="s", t=3), to_event(line, host="h", source="s", t=3)
    assert a.fields == b.fields and a.fields is not b.fields and a.fields["ranks"] is not b.fields["ranks"]
    assert type(a.t) is float and a.t == 3.0  # what validation made of it
    assert LogLine(t=3, host="h", raw="x").t == a.t
    assert "node" in a.model_copy(update={"node": "n"}).model_fields_set  # a copy adds to its own set...
    assert "node" not in b.model_fields_set and "node" not in a.model_fields_set  # ...not the one events share


def _first_problem(msg: str) -> str | None:
    """The priority order, read with ``in`` whatever the length."""
    return next((error for needle, _, _, error in _PROBLEMS if needle in msg), None)


@pytest.mark.parametrize("needle", [p[0] for p in _PROBLEMS])
def test_a_long_message_finds_the_same_problem_as_a_short_one(needle: str) -> None:
    for filler in ("e " * 3000, "a" * 6000, "x"):
        for msg in (filler + needle, needle + filler, filler + needle + " Health check failed " + filler):
            fields: dict = {}
            found = problem(msg, fields)
            assert (fields.get("error") if found else None) == _first_problem(msg), (needle, len(msg))


@pytest.mark.parametrize("text", ["e " * 3000, "a" * 5000, "Capturing " * 400, "x", "", "shards:" + "é" * 3000])
def test_a_finder_says_what_in_says(text: str) -> None:
    has = finder(text)
    for needle in ("Capturing ", "shards:", "Load weight ", "a a", "é", "e e e", "not there", READY_TEXT):
        assert has(needle) == (needle in text), (needle, len(text))


# The patterns as they were before issue 33 made them cheaper: each must find exactly what it found.
_OLD_ARG = re.compile(r"[(,] ?(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|-?\d+(?:\.\d+)?(?:e-?\d+)?|True|False|None)"
                      r"(?=[,)])")
_OLD_KV_EQ = re.compile(r"(?<![\w.])([\w.]+)=([^\s,]+)")
_OLD_TIMING = re.compile(r"(?<!\w)(\w+)=(\d+(?:\.\d+)?)(?=[,}\s]|$)")
_OLD_TIMING_GROUP = re.compile(r"(?<!\w)(\w+)=\{([^{}]*)\}")


def test_the_cheaper_patterns_find_what_the_old_ones_found() -> None:
    rng = random.Random(33)
    pieces = ["a", "_", ".", "=", "'", '"', "\\", ",", ")", "(", " ", "{", "}", "1", "2.5", "x=1", "k='v'", "\\'",
              "api_key=", "None", "True", "é", "\n"]
    texts = [g[0] for g in STARTUP] + [log_case(rng) for _ in range(400)]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 60))) for _ in range(3000)]
    for text in texts:
        assert _ARG.findall(text) == _OLD_ARG.findall(text), text
        assert _KV_EQ.findall(text) == _OLD_KV_EQ.findall(text), text
        assert _TIMING.findall(text) == _OLD_TIMING.findall(text), text
        assert _TIMING_GROUP.findall(text) == _OLD_TIMING_GROUP.findall(text), text
        assert _TIMING_GROUP.sub("", text) == _OLD_TIMING_GROUP.sub("", text), text


def _old_kv_pairs(text: str, fields: dict) -> None:
    """kv_pairs as it was before issue 33 (a regex search for every key's first letter)."""
    for key, val in _OLD_KV_EQ.findall(text):
        start = re.search(r"[A-Za-z_]", key)
        if start is None:
            continue
        key = key[start.start():]
        if key in fields or key in RESERVED:
            key = "field_" + key
        fields[key] = value(val.rstrip(".,)"))


def test_kv_pairs_keeps_the_same_keys_and_values() -> None:
    rng = random.Random(7)
    pieces = ["a", "_", ".", "=", "1", "é", "٣", "x=1", "_k=2", "1a=3", ".b=4", "é=5", "ts=6", " ", ",", "True"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 40)))
        got: dict = {"ts": "t"}
        want: dict = {"ts": "t"}
        kv_pairs(text, got)
        _old_kv_pairs(text, want)
        assert list(got.items()) == list(want.items()), text


def _assigned_everywhere(text: str) -> str:
    """The old redaction's first pass: ``_ASSIGNED`` tried at every character (the reference)."""
    from kimitui import knobs

    def assigned(m: re.Match[str]) -> str:
        start = m.start()
        while start > 0 and text[start - 1] in knobs._NAME_CHARS:
            start -= 1
        value = m.group("value")
        if value in knobs._UNSET or not knobs.is_secret(text[start : m.end()].partition("=")[0].strip()):
            return m.group(0)
        return m.group(0)[: m.start("value") - m.start()] + knobs._hidden(value)

    return knobs._ASSIGNED.sub(assigned, text)


def test_the_redaction_tried_only_at_its_words_hides_what_the_regex_everywhere_hid() -> None:
    """``redact_line`` tries its pattern only where a key/token/secret/password word is (issue 33: 0.45 -> 0.05 ms on
    a 20k-character ``ServerArgs`` dump): the same values hidden, on real-shaped lines and 20,000 random ones."""
    from kimitui.knobs import redact_line

    rnd = random.Random(33)
    alphabet = "keyKEYtokenTOKENsecretSecretpasswPASSW=' \",;_.a1\\\n()"
    texts = [g for g in GOLDEN] + [
        "server_args=ServerArgs(api_key='sk-1', admin_api_key=None, max_total_num_tokens=4096, "
        "ssl_keyfile_password=\"p w\", tokenizer_path='t', hf_token=hf_x, keyring=k, monkey=1)",
        "key=a key=b,token= c; secret_name=x passwd=y PASSWORD='z' Token=\"unterminated",
    ] + ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 80))) for _ in range(20_000)]
    for text in (t for t in texts if "--" not in t):  # no "--": the flag pass does not run
        assert redact_line(text) == _assigned_everywhere(text), repr(text)
    assert "sk-1" not in redact_line(texts[len(GOLDEN)]) and "hf_x" not in redact_line(texts[len(GOLDEN)])


def test_a_line_that_names_a_secret_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``ServerArgs`` dump with an api key was parsed, redacted and parsed again (1.5 ms at 20k characters, the log
    path's slowest line): it is redacted before its one parse, and its fields hold ``***``."""
    from kimitui.sglang.log import parse as parse_module

    calls: list[str] = []
    real = parse_module._parse

    def counted(text: str):  # type: ignore[no-untyped-def]
        calls.append(text)
        return real(text)

    monkeypatch.setattr(parse_module, "_parse", counted)
    line = ("[2026-12-06 10:00:00] server_args=ServerArgs(model_path='moonshotai/Kimi-K2.6', api_key='sk-live-1', "
            "tp_size=8, ep_size=8, max_total_num_tokens=1000000)")
    parsed = parse_line(line)
    assert len(calls) == 1 and "sk-live-1" not in calls[0]
    assert "sk-live-1" not in json.dumps(parsed.fields) and "***" in json.dumps(parsed.fields)
