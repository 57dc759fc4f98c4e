"""``/server_info``'s ``launch_command``: the flags the server was really started with.

SGLang 0.5.23 keeps ``" ".join(argv)`` of its own arguments (``server_args.py``
``prepare_server_args``; ``--watermark-config`` redacted), reported by ``utils/common.py``
``build_server_info``.  Read back here into knob -> value with the profile schema's names
(``--tp-size`` -> ``tp_size``: the inverse of :func:`kimitui.profiles.render.knob_args`), so drift
compares what was asked for with what the profile meant, not only SGLang's resolved args.
Values stay text (``"8"``); a bare flag is ``True``; a flag followed by several words is a list.
The join loses quoting: a value with spaces cannot be told from a list (nothing kimitui
renders has one).
"""

from __future__ import annotations

from typing import Any

ALIASES = {"model": "model_path", "tp": "tp_size", "ep": "ep_size", "dp": "dp_size",
           "tensor_parallel_size": "tp_size", "expert_parallel_size": "ep_size", "data_parallel_size": "dp_size",
           "pipeline_parallel_size": "pp_size", "speculative_draft_model": "speculative_draft_model_path"}
"""argparse aliases 0.5.23 accepts for a knob (``arg_groups/fields/*.py`` ``aliases=``)."""


def _knob(flag: str) -> str:
    name = flag.lstrip("-").replace("-", "_")
    return ALIASES.get(name, name)


def parse_launch_command(command: str) -> dict[str, Any]:
    """``--tp-size 8 --enable-eplb --labels a b --x=-1`` -> {tp_size: "8", enable_eplb: True, labels: [a, b], x: "-1"}."""
    words = command.split()
    out: dict[str, Any] = {}
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("--"):
            continue  # an interpreter or module name before the flags
        if "=" in word:
            flag, value = word.split("=", 1)
            out[_knob(flag)] = value
            continue
        values = []
        while i < len(words) and not words[i].startswith("--"):
            values.append(words[i])
            i += 1
        out[_knob(word)] = True if not values else values[0] if len(values) == 1 else values
    return out


def asked_for(expected: dict[str, Any], launched: dict[str, Any]) -> dict[str, Any]:
    """For each expected knob, what the launch command asked for; absent non-flags are left out
    (SGLang's default ran: the resolved args judge those), an absent flag is ``False``."""
    out: dict[str, Any] = {}
    for knob, meant in expected.items():
        if knob in launched:
            value = launched[knob]
            out[knob] = [value] if isinstance(meant, list) and not isinstance(value, list) else _typed(value, meant)
        elif isinstance(meant, bool):
            out[knob] = False
    return out


def _typed(value: Any, like: Any) -> Any:
    """``"8"`` as 8 when the profile meant an int (so drift reads ``[4, 8]``, not ``[4, '8']``)."""
    if isinstance(value, str) and not isinstance(like, bool) and isinstance(like, (int, float)):
        try:
            return type(like)(value)
        except ValueError:
            return value
    return value
