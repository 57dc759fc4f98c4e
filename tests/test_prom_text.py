"""kimitui's fast Prometheus reader gives what prometheus_client's parser gives, or hands the text to it (issue 33).

Compared family by family (name, type, each sample's name, labels and value) on the real SGLang 0.5.18 scrapes,
the simulator's and vLLM's, on text the library writes itself with escapes in it, and on 1,500 mutations of
real lines: where the library refuses a text, the reader refuses it too.
"""

from __future__ import annotations

import random

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kimitui.sglang.prom_text import Sample, families
from kimitui.sim.prometheus import SimMetrics
from tests.support.real_sglang import MODELS, read_http, real_output_dir
from tests.test_telemetry_metrics import VLLM_SCRAPE

REAL = real_output_dir()


def _read(fams: object) -> list[tuple[str, str, list[tuple[str, dict[str, str], float]]]]:
    return [(f.name, f.type, [(s.name, dict(s.labels), float(s.value)) for s in f.samples])  # type: ignore[attr-defined]
            for f in fams]  # type: ignore[attr-defined]


def _same(text: str) -> None:
    try:
        want = _read(text_string_to_metric_families(text))
    except Exception as exc:  # noqa: BLE001 - what the library refuses, the reader refuses
        with pytest.raises(type(exc)):
            _read(families(text))
        return
    assert repr(_read(families(text))) == repr(want)  # repr: NaN equals NaN


def _real_scrapes() -> list[str]:
    out = []
    for model in MODELS:
        for name in ("metrics_before.txt", "metrics_after.txt"):
            status, _, body = read_http(REAL / model / name)
            assert status == 200
            out.append(body)
    return out


def _sim_scrape() -> str:
    """The simulator's registry after it has served: every family it has, labels and buckets."""
    from kimitui.sim.scheduler import SchedStats

    sim = SimMetrics("kimi-k2.6", max_total_num_tokens=1_000_000, context_len=262_144)
    sim.request_done(100, 50, 0.2, 3.0, [(0.05, 1)] * 3, aborted=False, streaming=True)
    sim.queue_wait(0.01)
    return sim.render(SchedStats()).decode()


def test_real_scrapes_read_the_same_and_fast_path_is_taken() -> None:
    for text in _real_scrapes():
        _same(text)
        if "\\" not in text:
            assert all(isinstance(s, Sample) for f in families(text) for s in f.samples), "the fast path"


def test_the_simulators_and_vllms_scrapes_read_the_same() -> None:
    _same(_sim_scrape())
    _same(VLLM_SCRAPE % dict(running=3.0, queries=300.0, hits=50.0, prompt=1400.0, gen=1500.0))


def test_escapes_and_odd_names_go_to_the_library() -> None:
    reg = CollectorRegistry()
    Gauge("weird", "help with a \\ backslash", ["path"], registry=reg).labels(path='a"b\\c\nd').set(1)
    Counter("reqs", "requests", ["code"], registry=reg).labels(code="200").inc(3)
    Histogram("lat_seconds", "latency", registry=reg).observe(0.3)
    text = generate_latest(reg).decode()
    _same(text)
    assert not any(isinstance(s, Sample) for f in families(text) for s in f.samples)
    for odd in ('{__name__="x"} 1\n', 'x{a="1"} 1 # {t="e"} 2\n', "x 1_000\n", "x{a=\"1\"}1\n", "# TYPE x\n",
                'x{a="1",} 2 1700000000000\n', "x\t3\n", "x nan\n", "x +Inf\n", "1x 2\n"):
        _same(odd)


def test_mutated_lines_read_the_same_or_are_refused_alike() -> None:
    rnd = random.Random(33)
    base = _real_scrapes()[0].splitlines()[:120]
    tokens = [" ", "\t", "{", "}", ",", '"', "=", "#", "_", "1", "e", "-", "a", "\\", "# TYPE x gauge", "+Inf", "NaN"]
    for _ in range(1_500):
        lines = list(base)
        for _ in range(rnd.randint(1, 3)):
            i = rnd.randrange(len(lines))
            line = lines[i]
            at = rnd.randint(0, len(line))
            if rnd.random() < 0.5:
                lines[i] = line[:at] + rnd.choice(tokens) + line[at:]
            else:
                lines[i] = line[:at] + line[at + rnd.randint(1, 3):]
        _same("\n".join(lines) + "\n")
