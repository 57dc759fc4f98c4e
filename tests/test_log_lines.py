"""kimitui's own polling told apart from real traffic; each rank's copy of a line folded into one (issue 15)."""

from __future__ import annotations

from kimitui.analysis.log_lines import RankMerger, is_own_polling, merge_ranks, rank_set, split_rank

ACCESS = 'INFO:     127.0.0.1:51234 - "{} {} HTTP/1.1" 200 OK'


def test_polling_paths_are_own_polling_and_sweep_requests_are_not():
    for path in ("/metrics", "/v1/loads", "/health", "/server_info", "/get_server_info", "/v1/models",
                 "/metrics?x=1"):
        assert is_own_polling("access", ACCESS.format("GET", path)), path
    assert not is_own_polling("access", ACCESS.format("POST", "/v1/chat/completions"))
    assert not is_own_polling("access", ACCESS.format("GET", "/v1/chat/completions"))
    assert not is_own_polling("access", ACCESS.format("POST", "/flush_cache"))
    assert not is_own_polling("decode", "GET /metrics in a decode line is not an access line")


def test_split_rank_reads_the_scheduler_tags():
    assert split_rank("[2025-11-30 10:21:07 TP3 EP3] rebalance start") == (
        "2025-11-30 10:21:07", {"TP": 3, "EP": 3}, "rebalance start")
    assert split_rank("[2025-11-30 10:21:07] no rank") is None
    assert split_rank("plain text") is None


def test_rank_set_compresses_ranges():
    assert rank_set({"TP": set(range(8)), "EP": set(range(8))}) == "TP0–7 EP0–7"
    assert rank_set({"TP": {0, 1, 2, 5}}) == "TP0–2,5"


def test_eight_ranks_copies_become_one_line_naming_the_ranks():
    rows = [(100.0 + r * 0.01, "warning", "eplb", f"[2025-11-30 10:21:07 TP{r} EP{r}] rebalance end time=35.6 s")
            for r in range(8)]
    merged = merge_ranks(rows)
    assert len(merged) == 1
    assert merged[0].shown == "[2025-11-30 10:21:07 TP0–7 EP0–7] rebalance end time=35.6 s"
    assert merged[0].copies == 8


def test_same_rank_twice_and_distant_copies_stay_separate_events():
    m = RankMerger()
    first = m.add(1.0, "warning", "warning", "[2025-11-30 10:00:00 TP0] KV cache pool is full")
    assert first is not None
    assert m.add(1.1, "warning", "warning", "[2025-11-30 10:00:00 TP0] KV cache pool is full") is not None
    assert m.add(60.0, "warning", "warning", "[2025-11-30 10:00:00 TP1] KV cache pool is full") is not None
    other_kind = m.add(1.2, "info", "plain", "[2025-11-30 10:00:00 TP1] KV cache pool is full")
    assert other_kind is not None and first.shown.endswith("TP0] KV cache pool is full")


def test_merge_hides_polling_and_keeps_order():
    rows = [(1.0, "info", "access", ACCESS.format("GET", "/metrics")),
            (1.1, "info", "startup", "[2025-11-30 10:00:01 TP0] Load weight end."),
            (1.2, "info", "startup", "[2025-11-30 10:00:01 TP1] Load weight end."),
            (1.3, "info", "access", ACCESS.format("POST", "/v1/chat/completions")),
            (1.4, "info", "access", ACCESS.format("GET", "/health"))]
    shown = [m.shown for m in merge_ranks(rows)]
    assert shown == ["[2025-11-30 10:00:01 TP0–1] Load weight end.", ACCESS.format("POST", "/v1/chat/completions")]
    assert len(merge_ranks(rows, hide_polling=False)) == 4
