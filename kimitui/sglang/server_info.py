"""SGLang's ``/server_info``: what the running server says about itself, and drift from a profile.

The real 0.5.18 answer (``../shared/data/sglang-0.5.18-cpu/*/server_info.txt``, ~480 keys) is every
``ServerArgs`` field flat at the top level, plus ``version``, ``status`` (``"ready"``),
``max_total_num_tokens``, ``max_req_input_len``, ``startup_time`` and ``internal_states``: one object per
DP rank holding the args again with the scheduler's own (``last_gen_throughput``, ``memory_usage``,
``effective_max_running_requests_per_dp``...).  0.5.23 adds ``launch_command``: the flags really passed.
``/get_server_info`` is the deprecated alias (same answer; the server logs a deprecation line).
"""

from __future__ import annotations

import math
from typing import Any

from kimitui.sglang.knob_names import server_info_keys, sglang_arg
from kimitui.sglang.launch_command import asked_for, parse_launch_command

SERVER_INFO_PATHS = ("/server_info", "/get_server_info")
"""Newest first: SGLang before 2025-11 has only the second."""


def version(info: dict[str, Any]) -> str | None:
    """The server's SGLang version (``"0.5.18"``), None where it does not say."""
    v = info.get("version")
    return str(v) if v is not None else None


def rank_states(info: dict[str, Any]) -> list[dict[str, Any]]:
    """``internal_states``: one dict per DP rank (empty when the server gives none)."""
    states = info.get("internal_states")
    return [s for s in states if isinstance(s, dict)] if isinstance(states, list) else []


def flat_args(info: dict[str, Any]) -> dict[str, Any]:
    """The top-level settings with a plain value (strings, numbers, booleans, None): what a ServerInfo
    event keeps.  Lists and nested objects (``internal_states``, ``startup_time``...) are left out."""
    return {k: v for k, v in info.items() if isinstance(v, (str, int, float, bool)) or v is None}


def _same(meant: object, running: object) -> bool:
    if isinstance(meant, bool) or isinstance(running, bool):
        return bool(meant) == bool(running) if {type(meant), type(running)} <= {bool, int} else meant == running
    if isinstance(meant, (int, float)) and isinstance(running, (int, float)):
        return math.isclose(float(meant), float(running), rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(meant, (list, tuple)) and isinstance(running, (list, tuple)):
        return len(meant) == len(running) and all(_same(a, b) for a, b in zip(meant, running))
    return meant == running or (str(meant) == str(running) and meant is not None and running is not None)


def server_drift(info: dict[str, Any], expected: dict[str, Any]) -> dict[str, list[object]]:
    """knob -> [meant, running] for each expected knob the server reports differently.

    ``launch_command`` (SGLang 0.5.23: the flags really passed) is judged first, for the knobs it
    names; the flattened args for the rest.  Knobs the server does not report at all are not judged
    (older versions lack some fields); ``internal_states[0]`` is consulted when the top level lacks one.
    A knob SGLang names otherwise is read under SGLang's name (``cuda_graph_max_bs`` as
    ``cuda_graph_max_bs_decode``; before the split, as ``cuda_graph_max_bs``: knob_names); drift is
    keyed by the profile's knob.
    """
    states = rank_states(info)
    inner = states[0] if states else {}
    command = info.get("launch_command")
    knobs = {knob.replace("-", "_").lstrip("_"): meant for knob, meant in expected.items()}
    by_arg = {sglang_arg(knob): meant for knob, meant in knobs.items()}
    launched = asked_for(by_arg, parse_launch_command(command)) if isinstance(command, str) and command else {}
    drift: dict[str, list[object]] = {}
    for knob, meant in knobs.items():
        keys = server_info_keys(knob)
        if keys[0] in launched:
            running = launched[keys[0]]
        elif (key := next((k for k in keys if k in info), None)) is not None:
            running = info[key]
        elif (key := next((k for k in keys if k in inner), None)) is not None:
            running = inner[key]
        else:
            continue
        if not _same(meant, running):
            drift[knob] = [meant, running]
    return drift
