"""The simulated drafters' accept length and per-user speed-up over ep8-tuned, per concurrency.

From the simulator's own models (``kimitui/sim/spec_model.py``, ``perf_model.py``), no server: for
each C, a verify pass's expected accept length (code and prose prompts, 4,000 seeded passes each)
and the per-user decode rate against ep8-tuned's at the same C and KV load.  What the collapse rule
of ``kimitui/analysis/spec.py`` says of each level is printed beside it.

    .venv/bin/python bench/spec_model_table.py
    .venv/bin/python bench/spec_model_table.py --profiles ep8-dflash --levels 1,8,64,256

Goal: each drafter speeds a single user up (per-user speed-up on code prompts > 1.0x at the lowest C measured,
where speculative decoding pays most); PASS/FAIL per profile, exit 1 on FAIL.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kimitui.analysis.spec import COLLAPSE_GAIN_RATIO  # noqa: E402
from kimitui.sim.perf_model import PerfModel  # noqa: E402
from kimitui.sim.settings import load_settings  # noqa: E402

from benchutil import exit_on, verdict  # noqa: E402  # bench/ is on sys.path (the script's own folder)

SEED_LEVELS = (1, 8, 32, 64, 96, 128, 192, 256)
KV_PER_REQUEST = 800


def accept(model: PerfModel, code: bool, c: int, passes: int = 4000) -> float:
    assert model.spec is not None
    rng = random.Random(1)
    cap = model.spec.cap(c)
    return sum(model.spec.verify(rng, code, cap)[0] + 1 for _ in range(passes)) / passes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", default="ep8-dflash,ep8-eagle3")
    ap.add_argument("--levels", default=",".join(map(str, SEED_LEVELS)))
    args = ap.parse_args()
    base = PerfModel(load_settings("ep8-tuned"))
    levels = [int(c) for c in args.levels.split(",")]
    checks: list[bool] = []
    for name in args.profiles.split(","):
        m = PerfModel(load_settings(name))
        print(f"{name}  (C: accept length code/prose, per-user speed-up code/prose over ep8-tuned, rule)")
        ref = None
        first: float | None = None
        for c in levels:
            step, plain = m.decode_step_s(c, c * KV_PER_REQUEST), base.decode_step_s(c, c * KV_PER_REQUEST)
            acc_code, acc_prose = accept(m, True, c), accept(m, False, c)
            ref = ref if ref is not None else acc_code
            collapsed = acc_code - 1 < COLLAPSE_GAIN_RATIO * (ref - 1)
            print(f"  C={c:<4} accept {acc_code:5.2f} / {acc_prose:5.2f}   speed-up ×{acc_code * plain / step:4.2f} / "
                  f"×{acc_prose * plain / step:4.2f}   {'collapsed' if collapsed else ''}")
            first = first if first is not None else acc_code * plain / step
        if first is not None:
            checks.append(verdict(f"{name} per-user speed-up at C={levels[0]}, code", f"×{first:.2f}", "> ×1.0",
                                  first > 1.0))
    exit_on(checks)


if __name__ == "__main__":
    main()
