"""Evidence before verdicts, on the simulated host: the seeds' C=1 case.

At C=1 with 5 requests, EPLB's rebalances (a stall of decoding every ~1,000 forward passes) hold most of
one or two requests' time: the aggregate halves, but five requests cannot say by how much, so the verdict
is *unsure* — never "no change" — and names how many requests would settle it.  Swept again with that
many requests, it says *worse*.  Real simulated servers, the real sweep runner and recorder; real time
scaled 20x with short requests (a rebalance every ~8 requests), which one load process drives at C=1.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from kimitui.events import Marker, ServerInfo, SweepSpec
from kimitui.loadgen.runner import SweepRunner
from kimitui.recording import RecordingWriter
from kimitui.report import compare
from kimitui.session import Session
from tests.support.simserver import SimServerProcess, start_sim

pytestmark = pytest.mark.timeout(300)

MAX_TOKENS = 512
TIME_SCALE = 20.0


def fast(tmp: Path, name: str) -> str:
    path = tmp / f"fast-{name}.toml"
    path.write_text(f'name = "fast-{name}"\nextends = "{name}"\n[sim]\nstartup_s = 0.5\n')
    return str(path)


async def sweep(sim: SimServerProcess, tmp: Path, profile: str, name: str, requests: int) -> Path:
    session = Session(host="sim")
    writer = RecordingWriter(tmp / f"{name}.jsonl.gz", hosts=["sim"], meta={"profile": profile}).start()
    session.add_sink(writer)
    async with httpx.AsyncClient() as client:
        info = (await client.get(sim.url + "/server_info")).json()
    session.publish(ServerInfo(url=sim.url, version=info.get("version"), args=info))
    session.publish(Marker(label=f"sweep {profile}"))
    spec = SweepSpec(url=sim.url, model=sim.model, levels=[1], mode="sustained", max_tokens=MAX_TOKENS,
                     requests_per_level=requests, stop_on_oversaturation=False)
    runner = SweepRunner(session, spec, profile=profile)
    await runner.start()
    result = await asyncio.wait_for(runner.wait(), 240)
    assert result.outcome == "completed", result.reason
    return await writer.aclose()


def test_c1_with_five_requests_is_unsure_names_a_count_and_that_many_say_worse(tmp_path: Path) -> None:
    async def main() -> tuple[object, object]:
        sims = {"tuned": start_sim(fast(tmp_path, "ep8-tuned"), time_scale=TIME_SCALE, seed=1),
                "eplb": start_sim(fast(tmp_path, "ep8-eplb"), time_scale=TIME_SCALE, seed=1)}
        await asyncio.gather(*(s.__aenter__() for s in sims.values()))
        try:
            a5 = await sweep(sims["tuned"], tmp_path, "ep8-tuned", "tuned-5", 5)
            b5 = await sweep(sims["eplb"], tmp_path, "ep8-eplb", "eplb-5", 5)
            small = compare(a5, b5)
            agg = next(f for f in small.level(1).figures if f.figure == "agg_tok_s")  # type: ignore[union-attr]
            assert agg.verdict == "unsure", (small.summary_lines(), small.level(1).distorted)
            assert agg.change_pct is not None and agg.change_pct < -20, small.summary_lines()  # the loss is there
            assert agg.settle_requests is not None and agg.settle_requests > 5, agg.describe()
            assert f"about {agg.settle_requests} requests per level would settle it" in agg.describe()
            n = agg.settle_requests
            a = await sweep(sims["tuned"], tmp_path, "ep8-tuned", "tuned-n", n)
            b = await sweep(sims["eplb"], tmp_path, "ep8-eplb", "eplb-n", n)
            return small, compare(a, b)
        finally:
            await asyncio.gather(*(s.__aexit__(None, None, None) for s in sims.values()))

    small, big = asyncio.run(main())
    print("\n".join(small.summary_lines() + ["---"] + big.summary_lines()))
    agg = next(f for f in big.level(1).figures if f.figure == "agg_tok_s")  # type: ignore[union-attr]
    assert agg.verdict == "regressed", big.summary_lines()
    assert big.verdict == "regressed" and big.summary_lines()[0].startswith("worse:"), big.summary_lines()
