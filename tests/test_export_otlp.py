"""Finished sweeps as OpenTelemetry traces, received by a real OTLP/HTTP endpoint on 127.0.0.1 and decoded
with the OTLP protobuf messages (what a collector does with them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from kimitui.config import ConfigError, parse_config
from kimitui.events import LevelResult, LevelStarted, Percentiles, Straggler, SweepResult, SweepSpec, SweepStarted
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from kimitui.export.otlp import start_otlp, traces_url
from kimitui.session import Session
from tests.support.net import free_port
from tests.support.simserver import start_sim

T0 = 1_796_000_000.0


class Collector:
    """An OTLP/HTTP traces endpoint: every request decoded into its spans."""

    def __init__(self, port: int = 0) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = self.rfile.read(int(self.headers["Content-Length"]))
                owner.paths.append(self.path)
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                owner.requests.append(req)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def spans(self) -> list:
        return [span for req in self.requests for rs in req.resource_spans for ss in rs.scope_spans
                for span in ss.spans]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    yield c
    c.close()


def attrs(span) -> dict[str, object]:
    out: dict[str, object] = {}
    for kv in span.attributes:
        v = kv.value
        which = v.WhichOneof("value")
        out[kv.key] = list(x.int_value for x in v.array_value.values) if which == "array_value" else getattr(v, which)
    return out


def _sweep_events() -> list:
    spec = SweepSpec(url="http://127.0.0.1:30000", model="kimi-k2.6", levels=[1, 16], max_tokens=512)
    slow = Straggler(request_id="r-7", concurrency=16, decode_tok_s=7.7, median_decode_tok_s=21.5, max_gap_s=58.0,
                     gap_start=T0 + 30, gap_end=T0 + 88, reason="decode 7.7 tok/s < 0.5 x median 21.5")
    return [
        SweepStarted(t=T0, host="gpu-a", sweep_id="s1", spec=spec, profile="ep8-eplb"),
        LevelStarted(t=T0 + 1, host="gpu-a", sweep_id="s1", concurrency=1),
        LevelResult(t=T0 + 20, host="gpu-a", sweep_id="s1", concurrency=1, requests=2, ok=2, agg_tok_s=65.0,
                    wall_s=19.0, ttft=Percentiles(p50=0.2, p90=0.3, p99=0.4), decode_tok_s=Percentiles(p50=65.0)),
        LevelStarted(t=T0 + 21, host="gpu-a", sweep_id="s1", concurrency=16),
        LevelResult(t=T0 + 100, host="gpu-a", sweep_id="s1", concurrency=16, requests=32, ok=32, agg_tok_s=345.0,
                    steady_tok_s=350.0, wall_s=79.0, stragglers=[slow]),
        SweepResult(t=T0 + 101, host="gpu-a", sweep_id="s1", levels=[1, 16], peak_tok_s=345.0),
    ]


def test_a_finished_sweep_is_one_trace_with_a_span_per_level(collector: Collector) -> None:
    session = Session(host="gpu-a")
    export = start_otlp(session, collector.url)
    session.publish(SweepStarted(t=T0 - 50, host="gpu-a", sweep_id="never-finished",
                                 spec=_sweep_events()[0].spec, profile="x"))
    session.publish_many(_sweep_events())
    assert export.flush()
    export.close()
    assert collector.paths == ["/v1/traces"]
    spans = {span.name: span for span in collector.spans()}
    assert set(spans) == {"sweep ep8-eplb", "level C=1", "level C=16"}  # the unfinished sweep sends nothing
    root, c1, c16 = spans["sweep ep8-eplb"], spans["level C=1"], spans["level C=16"]
    assert c1.parent_span_id == root.span_id and c16.parent_span_id == root.span_id
    assert len({root.trace_id, c1.trace_id, c16.trace_id}) == 1
    assert (root.start_time_unix_nano, root.end_time_unix_nano) == (int(T0 * 1e9), int((T0 + 101) * 1e9))
    assert (c16.start_time_unix_nano, c16.end_time_unix_nano) == (int((T0 + 21) * 1e9), int((T0 + 100) * 1e9))
    a = attrs(root)
    assert a["kimitui.host"] == "gpu-a" and a["kimitui.profile"] == "ep8-eplb" and a["kimitui.sweep.levels"] == [1, 16]
    assert a["kimitui.sweep.peak_tok_s"] == 345.0 and a["kimitui.sweep.outcome"] == "completed"
    assert attrs(c1)["kimitui.level.ttft.p99"] == 0.4 and attrs(c1)["kimitui.level.agg_tok_s"] == 65.0
    assert attrs(c16)["kimitui.level.stragglers"] == 1 and attrs(c16)["kimitui.level.steady_tok_s"] == 350.0
    (event,) = c16.events
    assert event.name == "straggler" and event.time_unix_nano == int((T0 + 30) * 1e9)
    assert {kv.key: kv.value for kv in event.attributes}["kimitui.request_id"].string_value == "r-7"
    service = {kv.key: kv.value.string_value for kv in collector.requests[0].resource_spans[0].resource.attributes}
    assert service["service.name"] == "kimitui"


def test_the_config_and_the_endpoint_form() -> None:
    assert parse_config('[otlp]\nendpoint = "http://127.0.0.1:4318"\n').otlp.endpoint == "http://127.0.0.1:4318"
    with pytest.raises(ConfigError, match=r"c.toml:2: otlp.endpoint: 'collector:4318' is not an http\(s\) URL"):
        parse_config('[otlp]\nendpoint = "collector:4318"\n', "c.toml")
    assert traces_url("http://c:4318/") == "http://c:4318/v1/traces"
    assert traces_url("http://c:4318/v1/traces") == "http://c:4318/v1/traces"


def test_a_collector_that_is_down_costs_the_sweep_nothing() -> None:
    session = Session(host="gpu-a")
    export = start_otlp(session, "http://127.0.0.1:9")  # nothing listens there
    session.publish_many(_sweep_events())
    export.close()  # bounded: the SDK gives up on the export, nothing raises
    assert export.traces.exported == 1


def test_kimitui_sweep_sends_its_trace(collector: Collector, tmp_path: Path) -> None:
    with start_sim("ep8-tuned", time_scale=50) as sim:
        out = subprocess.run(
            [sys.executable, "-m", "kimitui", "sweep", "--url", sim.url, "--levels", "1,2", "--max-tokens", "16",
             "--mode", "burst", "--json", "--otlp-endpoint", collector.url],
            capture_output=True, text=True, timeout=120, env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["outcome"] == "completed"
    names = sorted(span.name for span in collector.spans())
    assert names == ["level C=1", "level C=2", "sweep"]


def test_a_collector_that_is_down_is_one_line_of_kimitui_said_once_until_it_is_back(capfd) -> None:
    """Issue 30: the SDK printed its own lines (``Transient error ... retrying`` per retry, then ``Failed to
    export``); kimitui says one line, once while sends fail, and again only after one succeeded."""
    port = free_port()  # closed: nothing listens there yet
    url = f"http://127.0.0.1:{port}/v1/traces"
    said: list[str] = []
    session = Session(host="gpu-a")
    export = start_otlp(session, f"http://127.0.0.1:{port}", say=said.append,
                        exporter=OTLPSpanExporter(endpoint=url, timeout=2))  # kimitui's own, with a short deadline
    try:
        for _ in range(2):
            session.publish_many(_sweep_events())
            export.flush()
        assert len(said) == 1, said
        assert said[0].startswith(f"kimitui: otlp: the collector at {url} did not take 1 sweep trace (Connection refused)")
        collector = Collector(port)  # back
        try:
            session.publish_many(_sweep_events())
            assert export.flush()
            assert [span.name for span in collector.spans()].count("sweep ep8-eplb") == 1
        finally:
            collector.close()
        session.publish_many(_sweep_events())  # down again: said again
        export.flush()
        assert len(said) == 2 and "(Connection refused)" in said[1], said
    finally:
        export.close()
    err = capfd.readouterr().err
    assert "Transient error" not in err and "Failed to export" not in err, err


def test_kimitui_sweep_with_its_collector_down_says_one_line(tmp_path: Path) -> None:
    port = free_port()
    with start_sim("ep8-tuned", time_scale=50) as sim:
        out = subprocess.run(
            [sys.executable, "-m", "kimitui", "sweep", "--url", sim.url, "--levels", "1", "--max-tokens", "16",
             "--mode", "burst", "--json", "--no-progress", "--otlp-endpoint", f"http://127.0.0.1:{port}"],
            capture_output=True, text=True, timeout=120, env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["outcome"] == "completed"
    otlp = [line for line in out.stderr.splitlines() if "otlp" in line.lower() or "export" in line.lower()]
    assert len(otlp) == 1, out.stderr
    assert otlp[0].startswith(f"kimitui: otlp: the collector at http://127.0.0.1:{port}/v1/traces did not take"), otlp
    assert "Transient error" not in out.stderr and "Traceback" not in out.stderr, out.stderr
