"""Where a profile's knob and SGLang's own argument differ in name: the flag to render, the key to read back.

A profile's knobs are named after SGLang's ``ServerArgs`` fields, so ``tp_size`` renders ``--tp-size``
and ``/server_info`` reports ``tp_size``.  One knob kept a name SGLang has since split:
``cuda_graph_max_bs`` (the largest decode batch captured in a CUDA graph).  SGLang (0.5.18's
``/server_info`` already has ``cuda_graph_max_bs_decode`` / ``_prefill``) takes it as
``--cuda-graph-max-bs-decode``; 0.5.23's parser refuses the old ``--cuda-graph-max-bs`` as an
ambiguous abbreviation of both.  Render, the launch command read back and the drift check all ask
this module, so a profile that says ``cuda_graph_max_bs = 128`` starts a server SGLang accepts and is
compared with what that server reports.
"""

from __future__ import annotations

SGLANG_ARG: dict[str, str] = {"cuda_graph_max_bs": "cuda_graph_max_bs_decode"}
"""knob -> SGLang's argument (``ServerArgs`` field) where the names differ."""

KNOB_OF_ARG: dict[str, str] = {arg: knob for knob, arg in SGLANG_ARG.items()}
"""SGLang's argument -> the knob that renders it (the inverse of :data:`SGLANG_ARG`)."""


def sglang_arg(knob: str) -> str:
    """The ``ServerArgs`` field a knob sets (its own name unless :data:`SGLANG_ARG` says otherwise)."""
    return SGLANG_ARG.get(knob, knob)


def knob_flag(knob: str) -> str:
    """The flag that sets a knob: ``tp_size`` -> ``--tp-size``, ``cuda_graph_max_bs`` -> ``--cuda-graph-max-bs-decode``."""
    return "--" + sglang_arg(knob).replace("_", "-")


def server_info_keys(knob: str) -> tuple[str, ...]:
    """The ``/server_info`` keys that report a knob, newest first: SGLang's current argument, then the
    knob's own name where an older server reported it so (``cuda_graph_max_bs`` before the split)."""
    arg = sglang_arg(knob)
    return (arg,) if arg == knob else (arg, knob)
