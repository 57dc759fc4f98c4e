"""A sweep asks only what the server's ``/server_info`` says it takes: labels in its header, speculative figures.

Against tests/support/spec_server.py, which records every request's headers and body and, when it has no
``/server_info`` (vLLM), refuses SGLang's extension field with a 400 as a strict server does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from kimitui.sglang.server_caps import sweep_caps
from kimitui.events import Event, LevelResult, RequestResult, SweepSpec
from kimitui.live.sweep_defaults import SweepDefaults
from kimitui.live.sweeps import with_server_caps
from kimitui.loadgen.sweep import SweepEngine
from tests.support.spec_server import SpecServer

pytestmark = pytest.mark.timeout(60)

EAGLE = {"speculative_algorithm": "EAGLE3", "tokenizer_metrics_custom_labels_header": "x-team-labels",
         "tokenizer_metrics_allowed_custom_labels": ["kimitui_level", "team"]}
BOTH = {"speculative_algorithm": "DFLASH", "tokenizer_metrics_custom_labels_header": "x-custom-labels",
        "tokenizer_metrics_allowed_custom_labels": ["kimitui_sweep", "kimitui_level"]}
PLAIN_SGLANG = {"speculative_algorithm": None, "tokenizer_metrics_custom_labels_header": "x-custom-labels",
                "tokenizer_metrics_allowed_custom_labels": None}


async def _sweep(url: str, start: SweepSpec | None = None) -> tuple[SweepSpec, list[Event]]:
    """The spec as the sweep command and the cockpit build it (``with_server_caps``), run in-process."""
    spec = await with_server_caps(start or SweepSpec(url=url, model="m", levels=[1, 2], requests_per_level=4,
                                                     warmup_requests=1, max_tokens=8,
                                                     extra_body={"chunks": [2, 3, 3], "tick_ms": 2}))
    events: list[Event] = []
    await SweepEngine(spec, events.append, sweep_id="sw-labels").run()
    return spec, events


def _level_of(request_id: str) -> str:
    found = re.search(r"-c(\d+)-", request_id)
    assert found, request_id
    return found.group(1)


async def test_each_request_carries_its_level_in_the_servers_header_and_only_the_labels_it_allows() -> None:
    """0.5.23 entrypoints/openai/serving_base.py extract_custom_labels: JSON in the configured header, allowed keys."""
    async with SpecServer(info=EAGLE) as srv:
        spec, events = await _sweep(srv.url)
    assert spec.spec_details and spec.labels_header == "x-team-labels" and spec.labels == ["kimitui_level"]
    chats = srv.chats
    assert len(chats) == 2 * (4 + 1)  # warm-ups are the level's traffic too
    for seen in chats:
        assert json.loads(seen.headers["x-team-labels"]) == {"kimitui_level": _level_of(seen.headers["x-request-id"])}
        assert seen.body["return_spec_tokens_details"] is True and "x-custom-labels" not in seen.headers
    results = [e for e in events if isinstance(e, RequestResult) and not e.warmup]
    assert len(results) == 8 and all(r.ok and r.spec is not None and r.spec.verify_ct == 3 for r in results)
    levels = [e for e in events if isinstance(e, LevelResult)]
    assert [lv.spec_requests for lv in levels] == [4, 4]
    assert all(lv.spec_accept_len_level == pytest.approx(8 / 3) for lv in levels)


async def test_both_labels_name_the_sweep_and_the_level() -> None:
    async with SpecServer(info=BOTH) as srv:
        await _sweep(srv.url)
    got = {json.dumps(json.loads(s.headers["x-custom-labels"]), sort_keys=True) for s in srv.chats}
    assert got == {json.dumps({"kimitui_sweep": "sw-labels", "kimitui_level": c}, sort_keys=True) for c in ("1", "2")}


async def test_a_server_without_server_info_is_asked_nothing_extra_even_from_a_stale_spec() -> None:
    """vLLM has no /server_info: no return_spec_tokens_details (a strict server answers 400) and no labels header."""
    async with SpecServer(info=None) as srv:
        stale = SweepSpec(url=srv.url, model="m", levels=[2], requests_per_level=3, max_tokens=4, spec_details=True,
                          labels_header="x-custom-labels", labels=["kimitui_sweep", "kimitui_level"])
        spec, events = await _sweep(srv.url, stale)
    assert not spec.spec_details and spec.labels_header is None and spec.labels == []
    assert len(srv.chats) == 3
    for seen in srv.chats:
        assert "return_spec_tokens_details" not in seen.body and "x-custom-labels" not in seen.headers
    results = [e for e in events if isinstance(e, RequestResult)]
    assert len(results) == 3 and all(r.ok and r.spec is None for r in results)
    [level] = [e for e in events if isinstance(e, LevelResult)]
    assert level.spec_requests == 0 and level.spec_accept_len_level is None


async def test_an_sglang_without_speculation_or_allowed_labels_gets_neither() -> None:
    async with SpecServer(info=PLAIN_SGLANG) as srv:
        spec, _ = await _sweep(srv.url)
    assert not spec.spec_details and spec.labels == []
    assert all("return_spec_tokens_details" not in s.body and "x-custom-labels" not in s.headers for s in srv.chats)


async def test_a_header_name_that_is_no_http_token_never_reaches_the_request() -> None:
    odd = {**BOTH, "tokenizer_metrics_custom_labels_header": "x-labels\r\nX-Injected: 1"}
    caps = sweep_caps(odd)
    assert caps.labels == [] and caps.labels_header is None and caps.spec_details
    assert "no HTTP header name" in caps.describe()[0]
    async with SpecServer(info=odd) as srv:
        await _sweep(srv.url)
        # a spec that names it anyway (a caller's, or a recording's) sends no labels either
        forced = SweepSpec(url=srv.url, model="m", levels=[1], requests_per_level=2, max_tokens=4,
                           labels_header="x labels", labels=["kimitui_level"])
        await SweepEngine(forced, lambda e: None).run()
    assert srv.chats and all("x-injected" not in s.headers and not any("labels" in h for h in s.headers)
                             for s in srv.chats)


def test_caps_read_server_info_as_0523_fills_it() -> None:
    """0.5.23 arg_groups/fields/observability.py: header default x-custom-labels; allowed labels default None."""
    assert sweep_caps({"tokenizer_metrics_allowed_custom_labels": ["kimitui_sweep"]}).labels_header == "x-custom-labels"
    assert sweep_caps({**BOTH, "tokenizer_metrics_custom_labels_header": None}).labels == []
    assert sweep_caps({**BOTH, "tokenizer_metrics_custom_labels_header": ""}).labels == []
    assert sweep_caps({**BOTH, "tokenizer_metrics_allowed_custom_labels": "kimitui_sweep"}).labels == []
    assert not sweep_caps({"speculative_algorithm": "NONE"}).spec_details
    assert not sweep_caps({"speculative_algorithm": 3}).spec_details
    assert sweep_caps({"speculative_algorithm": "NGRAM"}).spec_algorithm == "NGRAM"


def test_sweep_defaults_never_carry_one_servers_caps_to_the_next(tmp_path: Path) -> None:
    store = SweepDefaults(tmp_path / "sweep-defaults.json")
    store.remember(SweepSpec(url="http://a:1", model="m", levels=[4], max_tokens=64, spec_details=True,
                             labels_header="x-custom-labels", labels=["kimitui_level"]))
    saved: dict[str, Any] = json.loads(store.path.read_text())
    assert not {"spec_details", "labels_header", "labels"} & set(saved) and saved["max_tokens"] == 64
    store.path.write_text(json.dumps({**saved, "spec_details": True, "labels": ["kimitui_sweep"]}))  # an older file
    again = store.spec("http://b:2", "m")
    assert not again.spec_details and again.labels == [] and again.max_tokens == 64
