"""Knobs are knobs: runtime state and secrets never count in a knob diff, and a secret is ``***`` wherever
kimitui prints or saves it (the rule in :mod:`kimitui.knobs`), checked on a real SGLang ``/server_info``."""

from __future__ import annotations

import gzip
import json
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest

from kimitui.events import ServerInfo
from kimitui.knobs import REDACTED, RUNTIME_STATE, is_knob, is_runtime_state, is_secret, plannable, redact_command
from kimitui.launcher import guard
from kimitui.profiles import Profile, diff_profiles, load_profile
from kimitui.recording import Recording, RecordingHeader, write_recording
from kimitui.report import compare, summarize
from kimitui.session import Session
from kimitui.telemetry.metrics_poll import MetricsPoller
from kimitui.tune.steps import judge_step
from tests.support.httpapp import serve
from tests.support.recordings import synthetic_sweep

DATA = Path("/work/shared/data/sglang-0.5.18-cpu/tiny-qwen3moe/server_info.txt")
SECRET = "sk-live-0123456789"
TOKEN = "hf_abcdefSECRETtoken"


def real_server_info() -> dict[str, Any]:
    text = DATA.read_text()
    return json.loads(text[text.index("{"):])


needs_data = pytest.mark.skipif(not DATA.exists(), reason=f"{DATA} (the real server's /server_info) is not here")


@needs_data
def test_the_real_servers_secrets_and_runtime_state_are_named_by_the_one_rule() -> None:
    info = real_server_info()
    keys = set(info) | set(info["internal_states"][0])
    assert {k for k in keys if is_secret(k)} == {"api_key", "admin_api_key", "ssl_keyfile_password"}
    # what SGLang appends after its last ServerArgs field, and what only internal_states carries
    appended = list(info)[list(info).index("msprobe_dump_config") + 1:]
    assert appended and all(is_runtime_state(k) for k in appended), appended
    assert all(is_runtime_state(k) for k in set(info["internal_states"][0]) - set(info)), \
        set(info["internal_states"][0]) - set(info)
    for launched in ("enable_eplb", "ep_size", "chunked_prefill_size", "bucket_time_to_first_token", "ssl_keyfile",
                     "speculative_num_draft_tokens", "max_total_tokens", "tokenizer_path"):
        assert launched in info and is_knob(launched), launched
    assert not is_knob("status") and "status" in RUNTIME_STATE


@pytest.mark.parametrize("name", ["api_key", "admin_api_key", "HF_TOKEN", "hf_token", "env.HF_TOKEN", "--api-key",
                                  "env.AWS_SECRET_ACCESS_KEY", "env.PGPASSWORD", "ssl_keyfile_password"])
def test_a_name_that_says_key_token_secret_or_password_is_a_secret_never_a_knob(name: str) -> None:
    assert is_secret(name) and not is_knob(name) and not plannable(name)


def test_an_env_variable_is_never_planned_but_a_plain_one_still_diffs() -> None:
    assert not plannable("env.NCCL_P2P_DISABLE") and is_knob("env.NCCL_P2P_DISABLE") and plannable("enable_eplb")


def test_a_launch_command_keeps_its_flags_and_hides_the_secret_values() -> None:
    cmd = f"python3 -m sglang.launch_server --model-path m --api-key {SECRET} --admin-api-key={SECRET} --tp-size 8"
    assert redact_command(cmd) == ("python3 -m sglang.launch_server --model-path m --api-key *** "
                                   "--admin-api-key=*** --tp-size 8")


async def _poll(body: dict[str, Any], url: str) -> ServerInfo:
    async with httpx.AsyncClient() as client:
        poller = MetricsPoller(Session(), url, host="sim", client=client, expected_args={"api_key": "other"})
        return await poller.poll_server_info()


@needs_data
async def test_a_start_measured_while_the_server_said_starting_changes_one_knob_not_two(tmp_path: Path) -> None:
    """The reported defect: ``confounded: 2 knobs changed: enable_eplb (False -> True), status ('starting' -> 'ready')``
    on every autopilot step, and ``one knob changed: status`` on one; the secrets reached the recording."""
    served = real_server_info() | {"status": "starting", "api_key": SECRET,
                                   "launch_command": f"python3 -m sglang.launch_server --api-key {SECRET}"}
    async with serve({"/server_info": lambda: (200, served)}) as url:
        starting = await _poll(served, url)
        served.update(status="ready", enable_eplb=True, max_total_num_tokens=9000, max_req_input_len=2000)
        ready = await _poll(served, url)
        served.update(enable_eplb=False)
        ready_same = await _poll(served, url)
    assert starting.args["status"] == "starting"  # the cockpit still reads it, as state
    assert starting.args["api_key"] == REDACTED and starting.args["launch_command"].endswith("--api-key ***")
    assert starting.drift["api_key"] == [REDACTED, REDACTED]

    a = synthetic_sweep(seed=1, levels=[1, 8, 32], requests_per_level=20, knobs=starting.args)
    b = synthetic_sweep(seed=2, levels=[1, 8, 32], requests_per_level=20, knobs=ready.args, sweep_id="s2",
                        profile="ep8-eplb", peak_scale=0.56, t0=2_000_000.0)
    same = synthetic_sweep(seed=3, levels=[1, 8, 32], requests_per_level=20, knobs=ready_same.args, sweep_id="s3",
                           t0=3_000_000.0)
    cmp = compare(Recording(RecordingHeader(hosts=["sim"]), a), Recording(RecordingHeader(hosts=["sim"]), b))
    assert cmp.knob_diff == {"enable_eplb": (False, True)}
    assert cmp.knobs_text == "one knob changed: enable_eplb (False -> True)"
    assert "no knob changed" in compare(Recording(RecordingHeader(hosts=["sim"]), a),
                                        Recording(RecordingHeader(hosts=["sim"]), same)).knobs_text
    run_a = summarize(Recording(RecordingHeader(hosts=["sim"]), a)).sweeps[0]
    run_b = summarize(Recording(RecordingHeader(hosts=["sim"]), b)).sweeps[0]
    assert run_a.knobs is not None and "status" not in run_a.knobs and "api_key" not in run_a.knobs
    step = judge_step(run_a, run_b, "peak")  # the autopilot's words for the step
    assert "one knob changed: enable_eplb" in step.cause and "confounded" not in step.cause and "status" not in step.cause

    path = write_recording(tmp_path / "new" / "rec.jsonl.gz", [*a, *b])
    assert SECRET not in gzip.decompress(path.read_bytes()).decode()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def _with(base: Profile, name: str, **update: Any) -> Profile:
    data = base.model_dump() | {"name": name, "key": None, **update}
    return Profile.model_validate(data)


def test_a_secret_in_env_is_shown_as_stars_and_changes_no_knob() -> None:
    tuned = load_profile("ep8-tuned")
    token_only = _with(tuned, "ep8-token", env={**tuned.env, "HF_TOKEN": TOKEN})
    d = diff_profiles(tuned, token_only)
    assert d.lines() == ["env.HF_TOKEN: (default) -> ***"] and d.as_event_diff() == {"env.HF_TOKEN": [None, REDACTED]}
    assert not d.families and d.secrets == ["env.HF_TOKEN"] and not d.confounded
    both = _with(tuned, "ep8-eplb-token", enable_eplb=True, env={**tuned.env, "HF_TOKEN": TOKEN})
    report = guard.check(tuned, both, candidates=[])
    assert not report.confounded and "one knob changed" in report.message, report.message
    assert TOKEN not in repr(report.changes)


def test_an_api_key_in_extra_args_is_hidden_in_the_diff_and_the_event() -> None:
    tuned = load_profile("ep8-tuned")
    keyed = _with(tuned, "ep8-keyed", extra_args=["--api-key", SECRET, "--admin-api-key=" + SECRET])
    d = diff_profiles(tuned, keyed)
    assert d.changes == {"extra_args": ([], ["--api-key", REDACTED, "--admin-api-key=" + REDACTED])}
    assert SECRET not in "\n".join(d.lines()) and SECRET not in json.dumps(d.as_event_diff())
