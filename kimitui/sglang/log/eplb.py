"""Expert-parallel load balancing: ``[EPLBManager]`` rebalances and ``[Expert Balancedness]`` reports.

A real 0.5.18 MoE server started with ``--expert-balancedness-report-mode both`` writes one
``[Expert Balancedness] forward_pass_id=N current_pass_balancedness=... last_10_average_balancedness=...
gpu_physical_count_sum=...`` line per forward pass: :class:`~kimitui.sglang.log.kinds.EplbFields`.
"""

from __future__ import annotations

import re

from kimitui.sglang.log.values import Fields, as_float, as_int, kv_pairs

MANAGER_TAG = "EPLBManager"
BALANCEDNESS_TAG = "Expert Balancedness"

_EPLB_END = re.compile(r"rebalance end(?: time=(\d+(?:\.\d+)?)s)?")
_EPLB_EVERY = re.compile(r"rebalance per (\d+) iterations")
_EPLB_SKIP = re.compile(r"utilization (\d+(?:\.\d+)?) > minimum rebalance threshold (\d+(?:\.\d+)?)")


def eplb(msg: str, fields: Fields) -> bool:
    """An EPLB line's phase and figures; True when ``msg`` was one."""
    if "[EPLBManager]" in msg:
        if "rebalance start" in msg:
            fields["phase"] = "start"
        elif "rebalance end" in msg:
            fields["phase"] = "end"
            m = _EPLB_END.search(msg)
            fields["duration_s"] = as_float(m.group(1)) if m and m.group(1) else None
        elif "system started" in msg:
            fields["phase"] = "init"
            m = _EPLB_EVERY.search(msg)
            if m:
                fields["every_iters"] = as_int(m.group(1))
        elif "Skipped" in msg:
            fields["phase"] = "skipped"
            m = _EPLB_SKIP.search(msg)
            if m:
                fields["utilization"], fields["threshold"] = as_float(m.group(1)), as_float(m.group(2))
        else:
            fields["phase"] = "other"
        return True
    if "[Expert Balancedness]" in msg:
        fields["phase"] = "balancedness"
        kv_pairs(msg, fields)
        return True
    return False
