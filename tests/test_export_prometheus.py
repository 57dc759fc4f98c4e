"""kimitui's Prometheus endpoint: the real exporter served on 127.0.0.1, scraped over HTTP, parsed with
prometheus_client's own parser; events as the sources make them (the sweep worker's ``level_result``, the
simulated host's live controller)."""

from __future__ import annotations

import argparse
import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from kimitui.analysis.level_stats import level_result
from kimitui.cli import build_parser
from kimitui.commands import run
from kimitui.config import ConfigError, parse_config
from kimitui.events import (
    ConnectionState,
    Event,
    GpuReading,
    GpuSample,
    LevelResult,
    LevelStarted,
    ProfileState,
    ProfileSwitch,
    RequestResult,
    ServerHealth,
    ServerStats,
    SweepSpec,
    SweepStarted,
)
from kimitui.export import MetricsExporter, MetricsPortError, MetricsServer, serve
from kimitui.export.levels import KEEP_SWEEPS
from kimitui.live import LiveController
from kimitui.session import Session
from tests.support.net import free_port
from tests.support.recordings import busy_minute, gpu_sample, synthetic_sweep

MIB = 1048576.0
Samples = dict[str, list[tuple[dict[str, str], float]]]


def scrape(server: MetricsServer) -> Samples:
    """Every sample of a real scrape, by sample name (``_total`` included), as (labels, value)."""
    assert server.addr == "127.0.0.1"
    reply = httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=10.0)
    assert reply.status_code == 200, reply.text
    out: Samples = {}
    for family in text_string_to_metric_families(reply.text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """The one sample of ``name`` whose labels include ``labels``."""
    hits = [v for lbl, v in samples.get(name, []) if labels.items() <= lbl.items()]
    assert len(hits) == 1, f"{name}{labels}: {hits} of {samples.get(name)}"
    return hits[0]


@pytest.fixture
def served() -> Iterator[tuple[Session, MetricsServer]]:
    session = Session()
    server = serve(MetricsExporter(session), 0)
    try:
        yield session, server
    finally:
        server.close()
        server.exporter.detach()


def publish(session: Session, events: list[Event]) -> None:
    for ev in events:
        session.publish(ev)


# --------------------------------------------------------------------------- GPUs, server, profile


def test_gpu_server_and_profile_figures_scrape_with_units_and_labels(served: tuple[Session, MetricsServer]) -> None:
    session, server = served
    publish(session, busy_minute(t0=1000.0, seconds=2))  # host "sim": 8 GPUs at 90 %
    gpus = [GpuReading(index=i, util_pct=80.0 + i, mem_used_mib=70_000.0, mem_total_mib=81_559.0, power_w=650.5,
                       temp_c=71.0, sm_clock_mhz=1980.0, pcie_tx_kbps=2_500_000.0, pcie_rx_kbps=None,
                       throttle_reasons=["hw_slowdown"] if i == 3 else ["gpu_idle"]) for i in range(8)]
    publish(session, [
        ConnectionState(t=1001.0, host="gpu-a", state="connected"),
        GpuSample(t=1002.0, host="gpu-a", seq=7, gpus=gpus),
        ServerStats(t=1002.0, host="gpu-a", source="metrics", running_reqs=64, queued_reqs=3, token_usage=0.41,
                    gen_throughput=2950.0),
        ServerStats(t=1002.5, host="gpu-a", source="log", running_reqs=60),  # the newest figure wins, others stay
        ServerHealth(t=1003.0, host="gpu-a", ok=True, status=200, latency_s=0.12),
        ProfileState(t=1003.0, host="gpu-a", profile="ep8-tuned", state="starting"),
        ProfileState(t=1004.0, host="gpu-a", profile="ep8-tuned", state="serving"),
        ProfileSwitch(t=1004.0, host="gpu-a", from_profile=None, to_profile="ep8-tuned", outcome="ok"),
        ProfileSwitch(t=1005.0, host="gpu-a", from_profile="ep8-tuned", to_profile="ep8-v2", outcome="rolled_back"),
    ])
    m = scrape(server)
    assert len(m["kimitui_gpu_utilization_percent"]) == 16  # 8 GPUs on each of two hosts
    assert value(m, "kimitui_gpu_utilization_percent", host="gpu-a", gpu="5") == 85.0
    assert value(m, "kimitui_gpu_utilization_percent", host="sim", gpu="0") == 90.0
    assert value(m, "kimitui_gpu_memory_used_bytes", host="gpu-a", gpu="0") == 70_000.0 * MIB
    assert value(m, "kimitui_gpu_power_watts", host="gpu-a", gpu="2") == 650.5
    assert value(m, "kimitui_gpu_temperature_celsius", host="gpu-a", gpu="2") == 71.0
    assert value(m, "kimitui_gpu_sm_clock_hertz", host="gpu-a", gpu="2") == 1.98e9
    assert value(m, "kimitui_gpu_pcie_tx_bytes_per_second", host="gpu-a", gpu="2") == 2.5e9
    assert "kimitui_gpu_pcie_rx_bytes_per_second" not in m  # not reported: no sample, never a zero
    assert value(m, "kimitui_gpu_throttled", host="gpu-a", gpu="3") == 1.0
    assert value(m, "kimitui_gpu_throttled", host="gpu-a", gpu="4") == 0.0  # idle is not throttled
    assert value(m, "kimitui_gpu_sample_timestamp_seconds", host="gpu-a") == 1002.0
    assert value(m, "kimitui_server_running_requests", host="gpu-a") == 60.0
    assert value(m, "kimitui_server_queued_requests", host="gpu-a") == 3.0
    assert value(m, "kimitui_server_kv_usage_ratio", host="gpu-a") == 0.41
    assert value(m, "kimitui_server_generation_tok_s", host="gpu-a") == 2950.0
    assert value(m, "kimitui_server_up", host="gpu-a") == 1.0
    assert value(m, "kimitui_server_health_latency_seconds", host="gpu-a") == 0.12
    assert value(m, "kimitui_link_up", host="gpu-a") == 1.0
    # the profile's info is one series per host, the newest state
    assert m["kimitui_profile_info"] == [({"host": "gpu-a", "profile": "ep8-tuned", "state": "serving"}, 1.0)]
    assert value(m, "kimitui_profile_swaps_total", host="gpu-a", outcome="ok") == 1.0
    assert value(m, "kimitui_profile_swaps_total", host="gpu-a", outcome="rolled_back") == 1.0
    assert value(m, "kimitui_exporter_events_total", host="sim", kind="gpu_sample") == 8.0

    publish(session, [ConnectionState(t=1010.0, host="gpu-a", state="lost"),
                      ServerHealth(t=1010.0, host="gpu-a", ok=False, detail="timed out"),
                      ProfileState(t=1011.0, host="gpu-a", profile="ep8-v2", state="failed")])
    m = scrape(server)
    assert value(m, "kimitui_link_up", host="gpu-a") == 0.0
    assert value(m, "kimitui_server_up", host="gpu-a") == 0.0
    assert "kimitui_server_health_latency_seconds" not in m
    assert m["kimitui_profile_info"] == [({"host": "gpu-a", "profile": "ep8-v2", "state": "failed"}, 1.0)]


# --------------------------------------------------------------------------- sweeps


def test_sweep_levels_scrape_as_gauges_with_quantiles(served: tuple[Session, MetricsServer]) -> None:
    session, server = served
    publish(session, synthetic_sweep(levels=[1, 8, 32], repeats=2, failures={32: 2}, sweep_id="s1"))
    m = scrape(server)
    lbl = {"host": "sim", "profile": "ep8-tuned", "sweep": "s1"}
    assert len(m["kimitui_level_aggregate_tok_s"]) == 6  # 3 levels x 2 repeats
    assert value(m, "kimitui_level_requests", **lbl, level="32", repeat="1") == 34.0
    assert value(m, "kimitui_level_requests_ok", **lbl, level="32", repeat="1") == 32.0
    assert value(m, "kimitui_level_requests_failed", **lbl, level="32", repeat="1") == 2.0
    agg = value(m, "kimitui_level_aggregate_tok_s", **lbl, level="8", repeat="0")
    assert value(m, "kimitui_level_steady_tok_s", **lbl, level="8", repeat="0") == pytest.approx(agg * 1.02)
    assert value(m, "kimitui_level_ttft_seconds", **lbl, level="8", repeat="0", quantile="0.99") == 0.3
    assert value(m, "kimitui_level_ttft_seconds", **lbl, level="8", repeat="0", quantile="0.5") == 0.2
    decode = [lbls["quantile"] for lbls, _ in m["kimitui_level_decode_tok_s"] if lbls["level"] == "1"]
    assert sorted(decode) == ["0.5", "0.5", "0.9", "0.9", "0.99", "0.99"]
    assert value(m, "kimitui_level_valid", **lbl, level="1", repeat="0") == 1.0


def test_only_the_last_sweeps_keep_their_series(served: tuple[Session, MetricsServer]) -> None:
    session, server = served
    other = [ev.model_copy(update={"host": "gpu-b"}) for ev in synthetic_sweep(levels=[2], sweep_id="b0")]
    publish(session, other)  # another host's sweeps are kept on their own count
    n = KEEP_SWEEPS + 3
    for i in range(n):
        publish(session, synthetic_sweep(t0=1_000_000.0 + i * 1000, levels=[1, 4], sweep_id=f"s{i}",
                                         profile="ep8-tuned" if i % 2 else "ep8-v2", server_info=False))
    m = scrape(server)
    kept = {f"s{i}" for i in range(n - KEEP_SWEEPS, n)}
    for name in ("kimitui_level_aggregate_tok_s", "kimitui_level_ttft_seconds", "kimitui_level_requests",
                 "kimitui_level_valid"):
        assert {lbls["sweep"] for lbls, _ in m[name] if lbls["host"] == "sim"} == kept, name
        assert {lbls["sweep"] for lbls, _ in m[name] if lbls["host"] == "gpu-b"} == {"b0"}, name
    assert len(m["kimitui_level_aggregate_tok_s"]) == 2 * KEEP_SWEEPS + 1
    profiles = {lbls["sweep"]: lbls["profile"] for lbls, _ in m["kimitui_level_requests"]}
    assert profiles[f"s{n - 1}"] == ("ep8-tuned" if (n - 1) % 2 else "ep8-v2")
    assert profiles[f"s{n - 2}"] == ("ep8-tuned" if (n - 2) % 2 else "ep8-v2")


def _stalled_level(host: str, t0: float, sweep_id: str = "sw", c: int = 8) -> list[Event]:
    """A level as the sweep worker reports it: streamed requests (chunk times kept), one of which sat 10 s
    without a chunk while the host's SSH link was down; the LevelResult from ``level_result``."""
    spec = SweepSpec(url="http://127.0.0.1:30000", model="kimi", levels=[c], max_tokens=128)
    evs: list[Event] = [SweepStarted(t=t0, host=host, sweep_id=sweep_id, spec=spec, profile="ep8-tuned"),
                        LevelStarted(t=t0, host=host, sweep_id=sweep_id, concurrency=c)]
    results = []
    for r in range(c):
        sent = t0 + 0.01 * r
        offsets = [200.0 + 25.0 * k for k in range(128)]  # 40 tok/s after a 0.2 s TTFT
        if r == 0:
            offsets = [o + (10_000.0 if k >= 40 else 0.0) for k, o in enumerate(offsets)]
        gaps = [(b - a, a) for a, b in zip(offsets, offsets[1:])]
        gap, at = max(gaps)
        e2e = offsets[-1] / 1000.0
        results.append(RequestResult(
            t=sent + e2e, host=host, sweep_id=sweep_id, request_id=f"{sweep_id}-r{r}", concurrency=c, ok=True,
            intended_send=sent, sent=sent, ttft_s=0.2, e2e_s=e2e, completion_tokens=128, chunks=128,
            decode_tok_s=127 / (e2e - 0.2), e2e_tok_s=128 / e2e, tpot_s=(e2e - 0.2) / 127, itl_p50_s=0.025,
            itl_p99_s=gap / 1000.0, max_gap_s=gap / 1000.0, max_gap_at=sent + at / 1000.0,
            chunk_offsets_ms=offsets))
    stall = results[0].max_gap_at
    assert stall is not None
    evs += [ConnectionState(t=stall - 0.5, host=host, state="lost"),
            ConnectionState(t=stall + 10.5, host=host, state="connected")]
    evs += sorted(results, key=lambda r: r.t)
    evs.append(level_result(sweep_id, c, 0, spec, results, host=host, t=max(r.t for r in results) + 0.1))
    return evs


def test_stragglers_are_counted_by_the_cause_they_are_attributed_to(served: tuple[Session, MetricsServer]) -> None:
    session, server = served
    evs = _stalled_level("gpu-b", 5000.0)
    level = evs[-1]
    assert isinstance(level, LevelResult) and [s.request_id for s in level.stragglers] == ["sw-r0"]
    publish(session, [gpu_sample(4999.0 + i * 0.25, host="gpu-b") for i in range(4)] + evs)
    publish(session, synthetic_sweep(straggler_at=8, sweep_id="s9"))  # host "sim": no chunk times, no evidence
    m = scrape(server)
    assert value(m, "kimitui_stragglers_total", host="gpu-b", profile="ep8-tuned", cause="link_lost") == 1.0
    assert value(m, "kimitui_stragglers_total", host="sim", profile="ep8-tuned", cause="unknown") == 1.0
    assert value(m, "kimitui_level_stragglers", host="gpu-b", sweep="sw", level="8") == 1.0
    assert value(m, "kimitui_level_itl_seconds", host="gpu-b", sweep="sw", quantile="0.5") == 0.025


# --------------------------------------------------------------------------- isolation and threads


def test_two_exporters_in_one_process_keep_to_their_own_sessions() -> None:
    a, b = Session(), Session()
    sa, sb = serve(MetricsExporter(a), 0), serve(MetricsExporter(b), 0)
    try:
        assert sa.port != sb.port
        a.publish(gpu_sample(1.0, host="alpha"))
        b.publish(gpu_sample(1.0, host="beta", util=12.0))
        ma, mb = scrape(sa), scrape(sb)
        assert {lbl["host"] for lbl, _ in ma["kimitui_gpu_utilization_percent"]} == {"alpha"}
        assert {lbl["host"] for lbl, _ in mb["kimitui_gpu_utilization_percent"]} == {"beta"}
        assert value(mb, "kimitui_gpu_utilization_percent", gpu="0") == 12.0
        assert not [n for n in REGISTRY._names_to_collectors if n.startswith("kimitui_")]  # never the global one
    finally:
        sa.close()
        sb.close()


def test_scrapes_while_events_pour_in_never_fail(served: tuple[Session, MetricsServer]) -> None:
    session, server = served
    failures: list[BaseException] = []
    done = threading.Event()

    def scrape_loop() -> None:
        while not done.is_set():
            try:
                scrape(server)
            except BaseException as exc:  # noqa: BLE001 - any failure fails the test below
                failures.append(exc)
                return

    thread = threading.Thread(target=scrape_loop)
    thread.start()
    try:
        for i in range(20):
            publish(session, synthetic_sweep(t0=1e6 + i * 1000, levels=[1, 4], sweep_id=f"s{i}", server_info=False))
            publish(session, [gpu_sample(1e6 + i + k / 8, host=f"h{k}") for k in range(8)])
    finally:
        done.set()
        thread.join(10)
    assert not failures
    assert len(scrape(server)["kimitui_gpu_utilization_percent"]) == 8 * 8  # hosts h0..h7, 8 GPUs each


# --------------------------------------------------------------------------- config and `kimitui run`


def test_the_metrics_table_parses_and_a_bad_port_names_file_and_line() -> None:
    assert parse_config("").metrics.port is None and parse_config("").metrics.addr == "127.0.0.1"
    conf = parse_config('[metrics]\nport = 9470\naddr = "0.0.0.0"\n', "c.toml").metrics
    assert (conf.port, conf.addr) == (9470, "0.0.0.0")
    with pytest.raises(ConfigError) as bad:
        parse_config('default_host = "sim"\n\n[metrics]\nport = 70000\n', "c.toml")
    assert str(bad.value) == "c.toml:4: metrics.port: Input should be less than or equal to 65535"
    with pytest.raises(ConfigError, match=r"^c.toml:2: metrics.addr: 'a b' is not an address"):
        parse_config('[metrics]\naddr = "a b"\n', "c.toml")
    with pytest.raises(ConfigError, match=r"^c.toml:2: metrics.bind: unknown field"):
        parse_config("[metrics]\nbind = 1\n", "c.toml")


def _run_args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def test_run_serves_metrics_from_the_flag_or_the_config_and_the_flag_wins(sim_home: Path) -> None:
    cfg_port, flag_port = free_port(), free_port()
    cfg = sim_home / "config.toml"
    cfg.write_text(f"[metrics]\nport = {cfg_port}\n")
    assert run.start_metrics(_run_args("run"), LiveController(record=False)) is None  # nobody asked
    for argv, want in ([("--config", str(cfg), "run"), cfg_port],
                       [("--config", str(cfg), "run", "--metrics-port", str(flag_port)), flag_port]):
        args = _run_args(*argv)
        controller = LiveController(config_path=args.config, record=False)
        server = run.start_metrics(args, controller)
        assert server is not None
        try:
            assert (server.port, server.addr) == (want, "127.0.0.1")
            controller.session.publish(gpu_sample(1.0, host=controller.host_name))
            assert value(scrape(server), "kimitui_gpu_utilization_percent", host="sim", gpu="7") == 90.0
        finally:
            server.close()


def test_a_metrics_port_in_use_is_one_line_and_exit_2(sim_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        args = _run_args("run", "--no-record", "--metrics-port", str(port))
        assert run.handler(args) == 2  # before the TUI opens
        with pytest.raises(MetricsPortError):
            serve(MetricsExporter(), port)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"cannot serve metrics on 127.0.0.1:{port}" in err and "in use" in err


# --------------------------------------------------------------------------- the live cockpit


async def test_live_controller_on_the_simulated_host_scrapes_real_gpu_and_server_figures(sim_home: Path) -> None:
    controller = LiveController(record=False)
    server = run.start_metrics(_run_args("run", "--metrics-port", str(free_port())), controller)
    assert server is not None
    await controller.start()
    try:
        deadline = time.monotonic() + 60
        m: Samples = {}
        while time.monotonic() < deadline:
            m = await asyncio.to_thread(scrape, server)
            used = [v for _, v in m.get("kimitui_gpu_memory_used_bytes", [])]
            if (len(used) == 8 and min(used) > 50_000 * MIB and "kimitui_server_running_requests" in m
                    and "kimitui_server_up" in m and "kimitui_profile_info" in m):
                break
            await asyncio.sleep(0.2)
        else:
            raise AssertionError(f"the scrape never showed the served model: {sorted(m)}")
    finally:
        await controller.shutdown()
        server.close()
    host = controller.host_name
    assert {lbl["gpu"] for lbl, _ in m["kimitui_gpu_utilization_percent"]} == {str(i) for i in range(8)}
    assert all(0.0 <= v <= 100.0 for _, v in m["kimitui_gpu_utilization_percent"])
    assert all(v > 0 for _, v in m["kimitui_gpu_power_watts"])
    assert value(m, "kimitui_server_up", host=host) == 1.0
    assert value(m, "kimitui_link_up", host=host) == 1.0
    assert m["kimitui_profile_info"] == [({"host": host, "profile": "ep8-tuned", "state": "serving"}, 1.0)]
    assert value(m, "kimitui_profile_swaps_total", host=host, outcome="ok") == 1.0
    assert value(m, "kimitui_exporter_events_total", host=host, kind="gpu_sample") >= 1.0


def test_kimitui_runs_exporters_price_levels_from_the_configs_cost(sim_home: Path) -> None:
    """``[cost]`` in the config reaches ``kimitui run``'s Prometheus endpoint and its OTLP export (issue 34): each
    level's cost per million tokens is exported beside its energy, as the report prices it."""
    from kimitui.commands.common import start_otlp_if_asked

    cfg = sim_home / "config.toml"
    cfg.write_text(f"[metrics]\nport = {free_port()}\n\n[cost]\ngpu_hour = 2.10\nkwh = 0.18\n\n"
                   "[otlp]\nendpoint = \"http://127.0.0.1:9\"\n")
    args = _run_args("--config", str(cfg), "run")
    controller = LiveController(config_path=args.config, record=False)
    want = controller.config.cost.rates()
    assert want is not None
    server = run.start_metrics(args, controller)
    assert server is not None
    try:
        assert server.exporter.rates == want
    finally:
        server.close()
    otlp = start_otlp_if_asked(args, controller.session, controller.config)
    assert otlp is not None
    try:
        assert otlp.traces.rates == want
    finally:
        otlp.close()
