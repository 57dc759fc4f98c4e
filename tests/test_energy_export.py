"""Energy and cost in the exports (issue 34): Prometheus scraped over HTTP and OTLP traces sent to a collector on
127.0.0.1, from the hand-built sweep of tests/test_energy_report.py (8 GPUs, a known power per level)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kimitui.analysis.cost import CostRates
from kimitui.export import MetricsExporter, serve
from kimitui.export.otlp import start_otlp
from kimitui.session import Session
from tests.test_energy_report import LEVELS, sweep
from tests.test_export_otlp import Collector, attrs
from tests.test_export_prometheus import scrape, value


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    yield c
    c.close()


def test_prometheus_exports_each_levels_energy_cost_and_the_idle_power() -> None:
    session = Session()
    server = serve(MetricsExporter(session, CostRates(kwh=0.18, currency="USD")), 0)
    try:
        for ev in sweep("ep8-tuned", LEVELS):
            session.publish(ev)
        m = scrape(server)
    finally:
        server.close()
        server.exporter.detach()
    lbl = {"host": "sim", "profile": "ep8-tuned", "sweep": "s1", "repeat": "0"}
    # C=64: 8 GPUs x 500 W for 20 s, 32,000 tokens
    assert value(m, "kimitui_level_power_watts", **lbl, level="64") == pytest.approx(4000.0)
    assert value(m, "kimitui_level_energy_joules", **lbl, level="64") == pytest.approx(80_000.0)
    assert value(m, "kimitui_level_joules_per_token", **lbl, level="64") == pytest.approx(2.5)
    assert value(m, "kimitui_level_tokens_per_kilojoule", **lbl, level="64") == pytest.approx(400.0)
    assert value(m, "kimitui_level_cost_per_million_tokens", **lbl, level="64", currency="USD") == pytest.approx(0.125)
    assert value(m, "kimitui_sweep_idle_power_watts", host="sim", sweep="s1") == pytest.approx(800.0)
    assert len(m["kimitui_level_joules_per_token"]) == 3


def test_a_sweep_without_gpu_samples_exports_no_energy_series() -> None:
    session = Session()
    server = serve(MetricsExporter(session), 0)
    try:
        for ev in sweep("ep8-tuned", LEVELS, gpus=False):
            session.publish(ev)
        m = scrape(server)
    finally:
        server.close()
        server.exporter.detach()
    assert "kimitui_level_joules_per_token" not in m and len(m["kimitui_level_aggregate_tok_s"]) == 3


def test_otlp_level_spans_carry_the_energy_and_the_root_the_idle_power(collector: Collector) -> None:
    session = Session(host="sim")
    export = start_otlp(session, collector.url, rates=CostRates(gpu_hour=2.1))
    session.publish_many(sweep("ep8-tuned", LEVELS))
    assert export.flush()
    export.close()
    spans = {span.name: span for span in collector.spans()}
    c64 = attrs(spans["level C=64"])
    assert c64["kimitui.level.energy.j_per_token"] == pytest.approx(2.5)
    assert c64["kimitui.level.energy.tokens_per_kj"] == pytest.approx(400.0)
    assert c64["kimitui.level.energy.gpus"] == 8
    assert c64["kimitui.level.cost_per_mtok"] == pytest.approx(16.8 / (1600 * 3600) * 1e6)
    assert attrs(spans["sweep ep8-tuned"])["kimitui.sweep.idle_power_w"] == pytest.approx(800.0)
