"""The real SGLang 0.5.18 server's /metrics (../shared/data/sglang-0.5.18-cpu) through kimitui's parser.

Every figure kimitui shows is read from the real text and compared with the one sample that carries it,
found here by its full label set (engine_type, model_name, moe_ep_rank, pp_rank, tp_rank; pid on the
retraction gauge), so a parser that read a wrong series, dropped a labelled one or summed the wrong
labels is caught.  The catalogue in kimitui/sglang/metrics.py is held to the real families.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from kimitui.sglang.metrics import FAMILIES, MOE_ONLY_FAMILIES, SCHEDULER_LABELS, TOKENIZER_FAMILIES
from kimitui.telemetry.metrics_poll import CounterRates, known_metric_names, stats_from_metrics
from tests.support.real_sglang import MODELS, metric_families, read_http, real_output_dir

REAL = real_output_dir()
SCRAPES = [(model, name) for model in MODELS for name in ("metrics_before.txt", "metrics_after.txt")]


def _metrics(model: str, name: str) -> str:
    status, headers, body = read_http(REAL / model / name)
    assert status == 200 and headers["content-type"].startswith("text/plain")
    return body


def _sample(text: str, name: str, model: str) -> tuple[dict[str, str], float]:
    """The one sample named ``name`` with its labels, read by a regex (not the parser under test)."""
    hits = re.findall(rf"^{re.escape(name)}\{{([^}}]*)\}} (\S+)$", text, re.M)
    assert len(hits) == 1, f"{name}: {len(hits)} samples"
    labels = dict(re.findall(r'(\w+)="([^"]*)"', hits[0][0]))
    assert labels["model_name"] == f"models/{model}"
    return labels, float(hits[0][1])


SHOWN = {  # ServerStats field -> the real sample it is read from
    "running_reqs": "sglang:num_running_reqs",
    "queued_reqs": "sglang:num_queue_reqs",
    "token_usage": "sglang:token_usage",
    "gen_throughput": "sglang:gen_throughput",
    "num_tokens": "sglang:num_used_tokens",
    "cache_hit_rate": "sglang:cache_hit_rate",
    "retracted_reqs": "sglang:num_retracted_reqs",
    "utilization": "sglang:utilization",
    "kv_used_tokens": "sglang:kv_used_tokens",
}


@pytest.mark.parametrize(("model", "name"), SCRAPES)
def test_every_shown_figure_is_read_from_its_real_series(model: str, name: str) -> None:
    text = _metrics(model, name)
    stats = stats_from_metrics(text, host="real")
    assert known_metric_names(stats)
    for field, series in SHOWN.items():
        labels, value = _sample(text, series, model)
        assert {"engine_type", "model_name", "moe_ep_rank", "pp_rank", "tp_rank"} <= set(labels), series
        assert labels["engine_type"] == "unified" and labels["tp_rank"] == "0"
        assert getattr(stats, field) == value, field
    assert set(_sample(text, "sglang:num_retracted_reqs", model)[0]) == {*SCHEDULER_LABELS, "pid"}
    # a CPU server: no graphs (is_cuda_graph 0), and fwd_occupancy NaN until measured: no figure, not 0
    assert _sample(text, "sglang:is_cuda_graph", model)[1] == 0.0 and stats.cuda_graph is False
    assert math.isnan(_sample(text, "sglang:fwd_occupancy", model)[1]) and stats.fwd_occupancy is None
    # the prefill rate's counter: summed over is_streaming (and the MoE server's custom labels)
    prompt = sum(float(v) for v in re.findall(r"^sglang:prompt_tokens_total\{[^}]*\} (\S+)$", text, re.M))
    assert prompt > 0 and stats.extra["prompt_tokens_total"] == prompt


@pytest.mark.parametrize("model", MODELS)
def test_queue_time_is_the_mean_wait_of_the_requests_between_two_scrapes(model: str) -> None:
    before, after = _metrics(model, "metrics_before.txt"), _metrics(model, "metrics_after.txt")
    (_, s0), (_, n0) = (_sample(before, f"sglang:queue_time_seconds_{k}", model) for k in ("sum", "count"))
    (_, s1), (_, n1) = (_sample(after, f"sglang:queue_time_seconds_{k}", model) for k in ("sum", "count"))
    assert n1 > n0
    rates = CounterRates()
    first = stats_from_metrics(before, host="real", rates=rates)
    assert first.queue_time_s is None  # a first scrape has no window yet
    second = stats_from_metrics(after, host="real", rates=rates)
    assert second.queue_time_s == pytest.approx((s1 - s0) / (n1 - n0))
    assert stats_from_metrics(after, host="real", rates=rates).queue_time_s is None  # nobody left the queue since
    assert stats_from_metrics(after, host="real").queue_time_s == pytest.approx(s1 / n1)  # no rates: since start


@pytest.mark.parametrize("model", MODELS)
def test_the_catalogue_is_what_the_real_server_exports(model: str) -> None:
    """kimitui/sglang/metrics.py FAMILIES: every real family, its type, HELP and label names; the MoE server
    adds the two expert-balance families; the tokenizer's families carry the allowed custom labels."""
    real = metric_families(_metrics(model, "metrics_after.txt"))
    expected = set(FAMILIES) - (set() if model == "tiny-qwen3moe" else MOE_ONLY_FAMILIES)
    assert set(real) == expected
    listed = {line.split()[0].removesuffix("_total") for line in (REAL / model / "metric_names.txt").read_text().splitlines()}
    assert listed == expected
    custom = {"kimitui_sweep", "kimitui_level"} if model == "tiny-qwen3moe" else set()
    for name, (type_, labels, help_) in real.items():
        family = FAMILIES[name]
        own = labels - custom
        assert (type_, own, help_) == (family.type, frozenset(family.labels), family.help), name
        if custom:
            assert (labels & custom == custom) == (name in TOKENIZER_FAMILIES), name


def test_every_real_scrape_in_the_folder_is_read() -> None:
    """No /metrics capture is left out: each parses, and the one taken after the server died says so."""
    scrapes = sorted(Path(p).name for model in MODELS for p in (REAL / model).glob("metrics_*.txt"))
    assert scrapes == sorted(["metrics_before.txt", "metrics_after.txt"] * 2 + ["metrics_after_expert.txt"])
    status, _, body = read_http(REAL / "tiny-qwen3moe" / "metrics_after_expert.txt")
    assert status == 0 and "Couldn't connect to server" in body  # the expert dump had killed it


def test_cuda_graphs_are_read_from_the_pass_counter_not_the_gauge() -> None:
    """``sglang:is_cuda_graph`` is a gauge some versions never set (0 on a server running graphs); the real
    0.5.18 counts its passes by mode (``prefill_none``, ``decode_none`` on this CPU): kimitui reads those."""
    text = _metrics("tiny-llama", "metrics_after.txt")
    modes = dict(re.findall(r'^sglang:cuda_graph_passes_total\{[^}]*mode="(\w+)"[^}]*\} (\S+)$', text, re.M))
    assert set(modes) == {"prefill_none", "decode_none"} and float(modes["decode_none"]) > 0
    assert stats_from_metrics(text, host="real").cuda_graph is False
    gpu = text.replace('mode="decode_none"', 'mode="decode_cuda_graph"')  # a GPU server: graphs, gauge still 0
    assert _sample(gpu, "sglang:is_cuda_graph", "tiny-llama")[1] == 0.0
    assert stats_from_metrics(gpu, host="real").cuda_graph is True
    rates = CounterRates()
    stats_from_metrics(gpu, host="real", rates=rates)
    more = gpu.replace('mode="prefill_none"', 'mode="decode_none"')  # the next window: 9 eager decode passes
    assert stats_from_metrics(more, host="real", rates=rates).cuda_graph is False  # graphs off in this window
    idle = stats_from_metrics(more, host="real", rates=rates)
    assert idle.cuda_graph is True  # no decode pass since: the server's lifetime answer


def test_the_cache_hit_rate_is_the_counters_not_the_zeroed_gauge() -> None:
    """The real server's gauge said 0.0 after 16 of its 107 prompt tokens came from the cache; between two
    scrapes kimitui divides the cached-token counter's increase by the prompt-token counter's."""
    text = _metrics("tiny-llama", "metrics_after.txt")
    assert _sample(text, "sglang:cache_hit_rate", "tiny-llama")[1] == 0.0
    assert _sample(text, "sglang:cached_tokens_total", "tiny-llama")[1] == 16.0
    rates = CounterRates()
    assert stats_from_metrics(text, host="real", rates=rates).cache_hit_rate == 0.0  # first scrape: the gauge
    later = re.sub(r"^(sglang:cached_tokens_total\{[^}]*\}) 16.0$", r"\1 46.0", text, flags=re.M)
    later = re.sub(r'^(sglang:prompt_tokens_total\{[^}]*is_streaming="false"[^}]*\}) 98.0$', r"\1 138.0", later, flags=re.M)
    assert stats_from_metrics(later, host="real", rates=rates).cache_hit_rate == pytest.approx(30 / 40)
    assert stats_from_metrics(later, host="real", rates=rates).cache_hit_rate is None  # no prompt since


def test_start_up_phases_are_kept_apart() -> None:
    """``startup_time_seconds``' phases overlap (the tokenizer's end-to-end includes the weights' load): each
    is its own figure, never their sum."""
    text = _metrics("tiny-qwen3moe", "metrics_after.txt")
    phases = dict(re.findall(r'^sglang:startup_time_seconds\{[^}]*phase="(\w+)"[^}]*\} (\S+)$', text, re.M))
    extra = stats_from_metrics(text, host="real").extra
    assert "startup_time_seconds" not in extra
    assert {k: v for k, v in extra.items() if k.startswith("startup_time_seconds.")} == {
        f"startup_time_seconds.{phase}": float(v) for phase, v in phases.items()}
    assert extra["startup_time_seconds.tokenizer_e2e"] > extra["startup_time_seconds.load_weight"]


@pytest.mark.parametrize(("model", "name"), SCRAPES)
def test_the_parser_is_handed_no_bucket_and_the_figures_are_those_of_the_whole_text(
        model: str, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Buckets and ``_created`` stamps are two thirds of a real scrape and nothing reads them (issue 33: parsing them
    was the idle cockpit's largest cost): they are dropped before prometheus_client's parser, and every figure,
    ``extra`` included, is what the library gives on the whole text (two scrapes each, so the rates are compared)."""
    from kimitui.telemetry import metrics_poll

    text = _metrics(model, name)
    seen: list[str] = []
    library = metrics_poll.text_string_to_metric_families
    reader = metrics_poll.prom_families

    def whole(handed: str):  # type: ignore[no-untyped-def]
        return library(text)  # prometheus_client's parser on every line of the scrape

    def spy(handed: str):  # type: ignore[no-untyped-def]
        seen.append(handed)
        return reader(handed)

    monkeypatch.setattr(metrics_poll, "prom_families", whole)
    rates_whole = CounterRates()
    want = [stats_from_metrics(text, host="h", rates=rates_whole, now=1.0).model_dump(exclude={"t"}),
            stats_from_metrics(text, host="h", rates=rates_whole, now=2.0).model_dump(exclude={"t"})]
    seen.clear()
    monkeypatch.setattr(metrics_poll, "prom_families", spy)
    rates = CounterRates()
    got = [stats_from_metrics(text, host="h", rates=rates, now=1.0).model_dump(exclude={"t"}),
           stats_from_metrics(text, host="h", rates=rates, now=2.0).model_dump(exclude={"t"})]
    assert got == want
    unread = re.compile(r"^[^#\n{ ]*_(?:bucket|created)[{ ]", re.M)
    assert unread.search(text) and seen and not any(unread.search(handed) for handed in seen)
