"""SGLang's log lines, byte for byte (reference/sglang.md section 1, HEAD-2026-05 forms).

SGLang's own lines go to stderr as ``[YYYY-MM-DD HH:MM:SS( TPn)( EPn)] message``
(no level name); uvicorn's access lines go to stdout.  Every write is flushed
so a follower of the redirected file sees each line as it happens.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TextIO

from kimitui.sim.settings import ServerSettings


def timestamp(now: float | None = None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() if now is None else now))


class SimLog:
    """Writes SGLang-formatted lines; ``rank`` adds the scheduler tags (``TP3 EP3``)."""

    def __init__(self, settings: ServerSettings, stream: TextIO | None = None) -> None:
        self.s = settings
        self.stream = stream or sys.stderr
        self.ranks = settings.local_tp_ranks
        """The TP ranks this process prints for (all of them on a single node)."""

    def tags(self, rank: int) -> str:
        tags = ""
        if self.s.tp_size > 1:
            tags += f" TP{rank}"
        if self.s.ep_size > 1:
            tags += f" EP{rank * self.s.ep_size // self.s.tp_size}"
        return tags

    def rank_title(self, rank: int) -> str:
        """The scheduler's process title, e.g. ``sglang::scheduler_TP3_EP3``."""
        return "sglang::scheduler" + self.tags(rank).replace(" ", "_")

    def line(self, message: str, rank: int | None = None) -> None:
        if rank is not None and rank not in self.ranks:  # rank 0's own lines, on another node: its first rank
            rank = self.ranks[0]
        prefix = timestamp() + (self.tags(rank) if rank is not None else "")
        self.write(f"[{prefix}] {message}\n")

    def all_ranks(self, message: str) -> None:
        """A line every TP rank prints (start-up lines, EPLB lines)."""
        for rank in self.ranks:
            self.line(message, rank)

    def raw(self, text: str) -> None:
        """Text without a prefix (tqdm bars, tracebacks' continuation lines)."""
        self.write(text)

    def write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # closed pipe at shutdown: nothing left to tell
            pass

    def lines(self, messages: Iterable[str], rank: int | None = None) -> None:
        for message in messages:
            self.line(message, rank)


def decode_line(
    running: int,
    kv_tokens: int,
    token_usage: float,
    cuda_graph: bool,
    gen_throughput: float,
    queue: int,
    accept_len: float | None = None,
    accept_rate: float | None = None,
    cap_len: float | None = None,
    pd: PdDecodeCounts | None = None,
) -> str:
    """0.5.23 ``managers/scheduler_components/metrics_reporter.py`` (the Decode line): the speculative
    part ``accept len: x.xx, accept rate: x.xx, `` and, when rows were capped, ``cap len: x.xx, ``."""
    msg = f"Decode batch, #running-req: {running}, #token: {kv_tokens}, token usage: {token_usage:.2f}, "
    if accept_len is not None:
        msg += f"accept len: {accept_len:.2f}, accept rate: {(accept_rate or 0.0):.2f}, "
        if cap_len:
            msg += f"cap len: {cap_len:.2f}, "
    if pd is not None:  # only on a PD decode server, in metrics_reporter.py's order
        msg += (f"pre-allocated usage: {pd.prealloc_usage:.2f}, #prealloc-req: {pd.prealloc}, "
                f"#transfer-req: {pd.transfer}, #retracted-req: {pd.retracted}, ")
    msg += f"cuda graph: {cuda_graph}, gen throughput (token/s): {gen_throughput:.2f}, #queue-req: {queue}"
    return msg


def prefill_line(
    new_seq: int,
    new_token: int,
    cached_token: int,
    token_usage: float,
    running: int,
    queue: int,
    pending_token: int,
    cuda_graph: bool,
    input_throughput: float,
    pd: PdPrefillCounts | None = None,
) -> str:
    """0.5.23 ``metrics_reporter.py`` (the Prefill line); on a PD prefill server
    ``#bootstrap-req: N, #inflight-req: N, #optimistic-req: N, `` before ``cuda graph``."""
    pd_part = (f"#bootstrap-req: {pd.bootstrap}, #inflight-req: {pd.inflight}, #optimistic-req: {pd.optimistic}, "
               if pd is not None else "")
    return (
        f"Prefill batch, #new-seq: {new_seq}, #new-token: {new_token}, #cached-token: {cached_token}, "
        f"token usage: {token_usage:.2f}, #running-req: {running}, #queue-req: {queue}, "
        f"#pending-token: {pending_token}, {pd_part}cuda graph: {cuda_graph}, input throughput (token/s): {input_throughput:.2f}"
    )


@dataclass(frozen=True)
class PdDecodeCounts:
    """The PD decode part of a Decode line (``disagg_decode_prealloc_queue`` / ``transfer_queue``)."""

    prealloc_usage: float = 0.0
    prealloc: int = 0
    transfer: int = 0
    retracted: int = 0


@dataclass(frozen=True)
class PdPrefillCounts:
    """The PD prefill part of a Prefill line (``disagg_prefill_bootstrap_queue`` / ``inflight_queue``)."""

    bootstrap: int = 0
    inflight: int = 0
    optimistic: int = 0


def startup_timings_line(load_weight: float, kv_cache: float, scheduler_e2e: float, graph_decode: float,
                         draft_decode: float, tokenizer_e2e: float) -> str:
    """The real 0.5.18 server's summary of its start (seconds; no rank prefix, after the token budget):
    ``Engine startup timings (s): load_weight=0.18, kv_cache_allocation=0.05, scheduler_e2e=4.21,
    cuda_graph={prefill=0.00, decode=0.00, target_verify=0.00, draft_prefill=0.00, draft_decode=0.00,
    draft_extend=0.00}, tokenizer_e2e=74.87`` (../shared/data/sglang-0.5.18-cpu/logs)."""
    graphs = {"prefill": 0.0, "decode": graph_decode, "target_verify": 0.0, "draft_prefill": 0.0,
              "draft_decode": draft_decode, "draft_extend": 0.0}
    graph_text = ", ".join(f"{name}={secs:.2f}" for name, secs in graphs.items())
    return (f"Engine startup timings (s): load_weight={load_weight:.2f}, kv_cache_allocation={kv_cache:.2f}, "
            f"scheduler_e2e={scheduler_e2e:.2f}, cuda_graph={{{graph_text}}}, tokenizer_e2e={tokenizer_e2e:.2f}")


def tqdm_bar(desc: str, n: int, total: int, elapsed: float, unit_rate_label: str = "it/s") -> str:
    """One tqdm refresh: ``desc: 23%|██▎       | 12/52 [00:03<00:09,  4.10it/s]``."""
    frac = n / total if total else 1.0
    width = 10
    full = int(frac * width)
    partial_chars = " ▏▎▍▌▋▊▉"
    rem = frac * width - full
    bar = "█" * full
    if full < width:
        bar += partial_chars[int(rem * 8)] if rem > 0 else " "
        bar += " " * (width - full - 1)
    rate = n / elapsed if elapsed > 0 else 0.0
    remaining = (total - n) / rate if rate > 0 else 0.0
    rate_s = f"{rate:5.2f}{unit_rate_label}" if n else f"?{unit_rate_label}"
    left = _mmss(remaining) if n else "?"
    return f"{desc}: {int(frac * 100):3d}%|{bar}| {n}/{total} [{_mmss(elapsed)}<{left}, {rate_s}]"


def _mmss(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60:02d}:{seconds % 60:02d}"
