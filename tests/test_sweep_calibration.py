"""``random:N`` lands within 5 % of N prompt tokens as the target server counts them.

Against the real simulated SGLang server, a tiny real tokenizer's server
(``tests/support/tok_server.py``: /work/shared/data/tok-tiny, ~3 tokens a
word) and a server that reports no usage (``tests/support/minimal_server.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kimitui.loadgen.prompts import fit_words, random_prompt
from kimitui.loadgen.sweep import SweepEngine
from kimitui.events import ErrorEvent, Event, LevelResult, RequestResult, SweepSpec
from tests.support.simserver import start_sim
from tests.support.sweep_servers import minimal_server  # noqa: F401  (fixture)
from tests.support.tok_server import TOKENIZER_DIR, start_tok_server

pytestmark = pytest.mark.timeout(90)


async def sweep(url: str, model: str, n: int, **kw: Any) -> tuple[list[Event], list[RequestResult]]:
    base: dict[str, Any] = dict(url=url, model=model, levels=[2], max_tokens=4, requests_per_level=6,
                                prompts=f"random:{n}")
    base.update(kw)
    events: list[Event] = []
    await SweepEngine(SweepSpec(**base), events.append).run()
    return events, [e for e in events if isinstance(e, RequestResult)]


def test_fit_words_solves_the_line_through_the_probes() -> None:
    # 7 tokens of template, 3 tokens a word: 128 tokens is 40 words
    assert fit_words(128, [(64, 7 + 192), (128, 7 + 384)]) == 40
    assert fit_words(128, [(64, 73), (128, 137), (119, 128)]) == 119  # the last probe and the one before it


@pytest.mark.parametrize("n", [128, 1024])
async def test_random_n_lands_on_n_on_the_simulator(tmp_path: Path, n: int) -> None:
    prof = tmp_path / "fast.toml"
    prof.write_text('name = "fast"\nextends = "ep8-tuned"\n[sim]\nstartup_s = 0.5\n')
    async with start_sim(str(prof), time_scale=50) as sim:
        events, results = await sweep(sim.url, sim.model, n)
    assert results and all(r.ok for r in results)
    assert all(abs(r.prompt_tokens - n) <= 0.05 * n for r in results), [r.prompt_tokens for r in results]
    [note] = [e for e in events if isinstance(e, ErrorEvent)]
    assert note.severity == "info" and note.message.startswith(f"prompt calibration: random:{n} = ")


@pytest.mark.skipif(not TOKENIZER_DIR.exists(), reason="no tok-tiny tokenizer on this machine")
@pytest.mark.parametrize("n", [128, 1024])
async def test_random_n_lands_on_n_with_a_tiny_real_tokenizer(n: int) -> None:
    """A 3k-token vocabulary splits the common words (the field's vLLM counted 522 for random:128)."""
    async with start_tok_server() as server:
        events, results = await sweep(server.url, "tiny", n)
        uncalibrated = server.count(random_prompt(n, 0, 5))  # N words, as before calibration
    assert uncalibrated > 1.5 * n  # words alone would be far off here
    assert results and all(r.ok for r in results)
    assert all(abs(r.prompt_tokens - n) <= 0.05 * n for r in results), [r.prompt_tokens for r in results]
    assert any(isinstance(e, ErrorEvent) and e.severity == "info" and "prompt calibration" in e.message
               for e in events)


async def test_a_server_without_usage_is_said_and_prompts_stay_n_words(minimal_server) -> None:
    events, results = await sweep(minimal_server.url, "minimal", 64, extra_body={"tick_ms": 1, "no_usage": True})
    [err] = [e for e in events if isinstance(e, ErrorEvent)]
    assert "prompt calibration" in err.message and "64 words" in err.message and err.severity == "warning"
    assert all(r.ok for r in results) and [lv for lv in events if isinstance(lv, LevelResult)]
    assert len(minimal_server.state.request_ids) == 1 + 6  # one probe (no count: no fit), then the level
