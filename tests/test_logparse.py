"""The SGLang log parser: golden lines for every kind and version form, a fuzz, the CLI."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kimitui.events import LogLine, ServerStats, dump_event, parse_event
from kimitui.sglang.log import batch, kinds
from kimitui.sglang.log import parse_line, split_glued, to_event, to_stats
from tests.support.logsamples import ALL, DECODE, PREFILL, Golden, realistic_mix


@pytest.mark.parametrize("golden", ALL, ids=lambda g: f"{g[1]}:{g[0][:50]}")
def test_golden_line(golden: Golden) -> None:
    raw, kind, severity, expected = golden
    parsed = parse_line(raw)
    assert (parsed.line_kind, parsed.severity) == (kind, severity), parsed
    for key, value in expected.items():
        assert key in parsed.fields, (key, parsed.fields)
        got = parsed.fields[key]
        if isinstance(value, float):
            assert got == pytest.approx(value), key
        else:
            assert got == value, key
    assert "parse_error" not in parsed.fields


def test_every_version_of_the_decode_line_gives_the_same_core_fields() -> None:
    core = ("running_reqs", "num_tokens", "token_usage", "gen_throughput", "queued_reqs")
    for raw, *_ in DECODE:
        fields = parse_line(raw).fields
        assert all(k in fields or k in ("num_tokens",) for k in core), raw
        assert not fields.get("unparsed"), raw


def test_plain_line_keeps_text_and_no_fields_are_invented() -> None:
    ev = to_event("[2026-05-28 10:00:09] something new in SGLang 0.6\n", host="h", source="/var/log/x", cursor="17")
    assert isinstance(ev, LogLine)
    assert ev.raw == "[2026-05-28 10:00:09] something new in SGLang 0.6"
    assert ev.line_kind == "plain" and ev.fields == {"ts": "2026-05-28 10:00:09"}
    assert ev.source == "/var/log/x" and ev.cursor == "17" and ev.host == "h"


def test_to_event_round_trips_through_json() -> None:
    ev = to_event(DECODE[7][0], host="h", source="u", t=123.0)
    assert ev.t == 123.0
    assert parse_event(dump_event(ev)) == ev


def test_decode_line_becomes_server_stats() -> None:
    stats = to_stats(parse_line(DECODE[5][0]), host="h", t=5.0)
    assert isinstance(stats, ServerStats)
    assert stats.source == "log" and stats.running_reqs == 64 and stats.queued_reqs == 12
    assert stats.gen_throughput == pytest.approx(1702.55) and stats.cuda_graph is True
    assert stats.extra["accept_len"] == pytest.approx(2.87) and stats.extra["rank_dp"] == 1
    assert to_stats(parse_line("hello"), host="h") is None


@settings(max_examples=250, deadline=None)
@given(st.text())
def test_no_input_raises(text: str) -> None:
    parsed = parse_line(text)
    assert parsed.line_kind in {"decode", "prefill", "startup", "access", "eplb", "error", "warning", "plain"}
    assert "parse_error" not in parsed.fields
    to_event(text, host="h", source="s")


_PIECES = st.sampled_from(
    ["[2026-05-28 10:00:00 TP0] ", "Decode batch", ", ", ": ", "#running-req", "cuda graph", "True", "1.5", "%",
     "[EPLBManager] rebalance end time=", "s", "INFO:     ", '"GET / HTTP/1.1" ', "Capturing batches (bs=",
     " avail_mem=", " GB): ", "|", "/", "\r", "\x1b[", "m", "Load weight end", "=", "12", "KV Cache is allocated"]
)


@settings(max_examples=250, deadline=None)
@given(st.lists(_PIECES, max_size=14).map("".join))
def test_no_near_miss_raises(text: str) -> None:
    assert "parse_error" not in parse_line(text).fields


def test_logs_parse_command_prints_one_json_event_per_line() -> None:
    lines = [g[0].replace("\r", " ") for g in ALL[:12]]
    proc = subprocess.run(
        [sys.executable, "-m", "kimitui", "logs", "parse", "--host", "gpu-host.example"],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    out = [json.loads(x) for x in proc.stdout.splitlines()]
    assert len(out) == len(lines)
    assert out[0]["kind"] == "log_line" and out[0]["line_kind"] == "decode"
    assert out[0]["host"] == "gpu-host.example"
    assert [o["raw"] for o in out] == lines


def test_a_log_line_glued_onto_a_tqdm_bar_is_split_off() -> None:
    glued = ("\rCapturing batches (bs=512 avail_mem=10.80 GB):   0%|          | 0/52 [00:00<?, ?it/s]"
             "\rCapturing batches (bs=400 avail_mem=10.60 GB):  13%|█▎        | 7/52 [00:00<00:00, 163.14it/s]"
             '[2026-11-30 10:18:36] INFO:     127.0.0.1:5000 - "GET /health HTTP/1.1" 200 OK')
    bar, line = split_glued(glued)
    assert parse_line(bar).fields["i"] == 7 and parse_line(bar).line_kind == "startup"
    assert parse_line(line).line_kind == "access" and parse_line(line).fields["path"] == "/health"
    plain_bar = "\rCapturing batches (bs=1 avail_mem=9.32 GB): 100%|██████████| 52/52 [00:00<00:00, 179.38it/s]"
    assert split_glued(plain_bar) == [plain_bar] and split_glued("no cr [2026-01-01 00:00:00]") == [
        "no cr [2026-01-01 00:00:00]"]


@settings(max_examples=120, deadline=None)
@given(
    running=st.integers(0, 10**6), tokens=st.integers(0, 10**8), usage=st.floats(0, 1),
    graph=st.booleans(), thr=st.floats(0, 10**6), queue=st.integers(0, 10**6),
    dp=st.one_of(st.none(), st.integers(0, 63)), tp=st.integers(0, 63), form=st.sampled_from(["v046", "dec2025", "head"]),
)
def test_decode_figures_survive_every_format(running: int, tokens: int, usage: float, graph: bool, thr: float,
                                             queue: int, dp: int | None, tp: int, form: str) -> None:
    tags = (f" DP{dp}" if dp is not None else "") + f" TP{tp}"
    graph_part = "" if form == "v046" else f"cuda graph: {graph}, "
    head = "Decode batch." if form == "v046" else "Decode batch,"
    tail = ", " if form == "dec2025" else ""
    raw = (f"[2026-05-28 10:00:00{tags}] {head} #running-req: {running}, #token: {tokens}, token usage: {usage:.2f}, "
           f"{graph_part}gen throughput (token/s): {thr:.2f}, #queue-req: {queue}{tail}")
    p = parse_line(raw)
    assert p.line_kind == "decode"
    f = p.fields
    assert (f["running_reqs"], f["num_tokens"], f["queued_reqs"]) == (running, tokens, queue)
    assert f["token_usage"] == pytest.approx(round(usage, 2)) and f["gen_throughput"] == pytest.approx(round(thr, 2))
    assert f.get("cuda_graph") == (None if form == "v046" else graph)
    assert f["ranks"].get("dp") == dp and f["ranks"]["tp"] == tp


def test_logs_follow_command_prints_a_files_lines_and_stops_on_sigint(tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "server.log"
    log.write_text("old 1\nold 2\nold 3\n")
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "KIMITUI_CONFIG": ""}
    env.pop("KIMITUI_CONFIG")
    proc = subprocess.Popen([sys.executable, "-m", "kimitui", "logs", "follow", "--path", str(log), "--backlog", "2",
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        got = [json.loads(proc.stdout.readline()) for _ in range(2)]
        with open(log, "a") as fh:
            fh.write("[2026-05-28 10:00:01] The server is fired up and ready to roll!\n")
        got.append(json.loads(proc.stdout.readline()))
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert [g["raw"] for g in got] == ["old 2", "old 3", "[2026-05-28 10:00:01] The server is fired up and ready to roll!"]
    assert got[2]["line_kind"] == "startup" and got[2]["cursor"] == "4" and got[2]["host"] == "sim"
    assert "--from-cursor '4'" in proc.stderr.read()


def test_the_fast_paths_agree_with_the_generic_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [g[0] for g in DECODE + PREFILL]
    fast = {line: parse_line(line).fields for line in lines}
    assert sum(batch._DECODE_FAST.search(x) is not None or batch._PREFILL_FAST.search(x) is not None
               for x in lines) >= 10  # most golden lines take a fast path
    monkeypatch.setattr(batch, "_DECODE_FAST", re.compile(r"(?!)"))  # never matches: generic loop only
    monkeypatch.setattr(batch, "_PREFILL_FAST", re.compile(r"(?!)"))
    assert {line: parse_line(line).fields for line in lines} == fast


@settings(max_examples=120, deadline=None)
@given(
    seqs=st.integers(0, 4096), new=st.integers(0, 10**6), cached=st.integers(0, 10**6), usage=st.floats(0, 1),
    running=st.integers(0, 10**5), queue=st.integers(0, 10**5), pending=st.integers(0, 10**7),
    graph=st.booleans(), thr=st.floats(0, 10**7), form=st.sampled_from(["v046", "dec2025", "feb2026", "head"]),
)
def test_prefill_figures_survive_every_format(seqs: int, new: int, cached: int, usage: float, running: int,
                                              queue: int, pending: int, graph: bool, thr: float, form: str) -> None:
    head = "Prefill batch." if form == "v046" else "Prefill batch,"
    body = (f"#new-seq: {seqs}, #new-token: {new}, #cached-token: {cached}, token usage: {usage:.2f}, "
            f"#running-req: {running}, #queue-req: {queue}")
    body += {"v046": "", "dec2025": ", ",
             "feb2026": f", input throughput (token/s): {thr:.2f}, cuda graph: {graph}",
             "head": f", #pending-token: {pending}, cuda graph: {graph}, input throughput (token/s): {thr:.2f}"}[form]
    p = parse_line(f"[2026-05-28 10:00:00 TP0] {head} {body}")
    f = p.fields
    assert p.line_kind == "prefill"
    assert (f["new_seq"], f["new_token"], f["cached_token"], f["running_reqs"], f["queued_reqs"]) == (
        seqs, new, cached, running, queue)
    assert f["token_usage"] == pytest.approx(round(usage, 2))
    assert f.get("pending_token") == (pending if form == "head" else None)
    assert f.get("cuda_graph") == (graph if form in ("feb2026", "head") else None)
    assert f.get("input_throughput") == (pytest.approx(round(thr, 2)) if form in ("feb2026", "head") else None)


FIELD_SETS: dict[str, type] = {
    "decode": kinds.DecodeFields, "prefill": kinds.PrefillFields, "startup": kinds.StartupFields,
    "access": kinds.AccessFields, "eplb": kinds.EplbFields, "error": kinds.ProblemFields,
    "warning": kinds.ProblemFields, "plain": kinds.LineFields,
}
UNDECLARED_OK = {"brand_new_key", "fwd_occupancy"}
"""A batch line's keys kimitui does not know are kept slugged (a newer SGLang's figure): the samples carry two."""


def test_every_field_the_parser_writes_is_declared_for_its_kind() -> None:
    """The contract consumers are type-checked against (kimitui/sglang/log/kinds.py) covers what the parser writes:
    every kind it returns is a ``LineKind``, every field of the golden and realistic lines is declared for it."""
    assert set(FIELD_SETS) == kinds.LINE_KINDS
    lines = [g[0] for g in ALL] + list(realistic_mix())
    undeclared: set[tuple[str, str]] = set()
    for raw in lines:
        parsed = parse_line(raw)
        declared = typing.get_type_hints(FIELD_SETS[parsed.line_kind])
        undeclared |= {(parsed.line_kind, key) for key in parsed.fields
                       if key not in declared and key not in UNDECLARED_OK
                       and not re.fullmatch(r"last_\d+_average_balancedness", key)}
    assert not undeclared


def test_fields_if_gives_a_lines_fields_only_for_its_kind() -> None:
    decode = parse_line(DECODE[0][0])
    assert kinds.fields_if(decode, "decode") is decode.fields and kinds.fields_if(decode, "prefill") is None
    assert kinds.is_kind(decode, "prefill", "decode") and not kinds.is_kind(decode, "eplb")
    event = to_event(DECODE[0][0], host="h", source="s")
    assert kinds.fields_if(event, "decode") == decode.fields and kinds.problem_fields(event) is None


@pytest.mark.parametrize("side", ["Prefill", "Decode"])
def test_a_pd_servers_failed_kv_transfer_is_an_error_naming_its_side_room_and_exception(side: str) -> None:
    """0.5.23 disaggregation/prefill.py and decode.py log these at ERROR, but SGLang's format prints no level:
    the text must say it (they were plain)."""
    rid = "req.rid='5e1f'" if side == "Prefill" else "decode_req.req.rid='5e1f' decode_req."
    line = (f"[2026-05-28 10:05:13 TP0] {side} transfer failed for request rank=0 {rid}"
            f"{'req.' if side == 'Prefill' else 'req.'}bootstrap_room=4711 with exception "
            "KVTransferError(bootstrap_room=4711): transfer timed out")
    parsed = parse_line(line)
    assert (parsed.line_kind, parsed.severity) == ("error", "error")
    assert {k: parsed.fields[k] for k in ("error", "side", "bootstrap_room", "exception")} == {
        "error": "kv_transfer", "side": side.lower(), "bootstrap_room": 4711, "exception": "KVTransferError"}
