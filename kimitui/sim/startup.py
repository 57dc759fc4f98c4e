"""SGLang's start-up, acted out: the log sequence and the memory filling up.

Order and text follow reference/sglang.md section 1.4 (HEAD-2026-05): the
``server_args`` dump, torch distributed init, weight loading with the shard
progress, KV cache, CUDA graph capture with its tqdm bar (``\\r`` refreshes on
stderr, no timestamp), the summary line, uvicorn's lines, the warm-up request
and "The server is fired up and ready to roll!".  Phases take the model's
simulated durations divided by the time-scale.  The faults ``crash_load`` and
``oom_start`` end the sequence with SGLang's error text.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kimitui.sim.faults import crash_load_lines, oom_lines
from kimitui.sim.logfmt import SimLog, startup_timings_line, tqdm_bar
from kimitui.sim.perf_model import GPU_TOTAL_GB, KV_BYTES_PER_TOKEN, PerfModel, capture_batch_sizes
from kimitui.sim.scheduler import SimClock
from kimitui.sim.settings import ServerSettings

NUM_SHARDS = 64
MODEL_CLASS = "KimiK25ForConditionalGeneration"
BASE_USAGE_GB = 1.27  # CUDA context + NCCL buffers after distributed init


@dataclass
class BootState:
    """Where start-up is; the GPU state writer reads it."""

    phase: str = "starting"
    """starting -> loading -> kv -> graph -> warmup -> serving; or failed / stopping."""
    mem_used_gb: float = 0.0
    progress: float = 0.0
    t_phase: float = field(default_factory=time.monotonic)

    def enter(self, phase: str) -> None:
        self.phase, self.progress, self.t_phase = phase, 0.0, time.monotonic()


class StartupFailed(Exception):
    """A start-up fault fired; the server must exit with a non-zero code."""


def server_args_repr(settings: ServerSettings) -> str:
    parts = ", ".join(f"{k}={v!r}" for k, v in settings.server_args().items())
    return f"server_args=ServerArgs({parts})"


async def run_startup(settings: ServerSettings, model: PerfModel, log: SimLog, clock: SimClock, boot: BootState,
                      rendezvous: Callable[[], Awaitable[None]] | None = None) -> None:
    """Everything up to the summary line; raises :class:`StartupFailed` for start-up faults.

    ``rendezvous`` (multi-node, :mod:`kimitui.sim.multinode`) runs inside "Init torch distributed", which
    ends only when every node has joined."""
    plan = model.startup_plan()
    started = time.monotonic()
    log.line(server_args_repr(settings))
    if settings.gpus_per_node > 2:
        log.all_ranks(
            "CustomAllreduce is disabled because it's not supported on more than two PCIe-only GPUs. "
            "To silence this warning, specify disable_custom_all_reduce=True explicitly."
        )
    await _init_distributed(plan, log, clock, boot, rendezvous)
    marks = [time.monotonic()]  # each phase's end: weights, KV cache, graphs
    avail = await _load_weights(settings, model, plan, log, clock, boot, GPU_TOTAL_GB - BASE_USAGE_GB)
    marks.append(time.monotonic())
    avail = await _allocate_kv_cache(model, plan, log, clock, boot, avail)
    marks.append(time.monotonic())
    if not settings.disable_cuda_graph:
        avail = await _capture_cuda_graphs(settings, model, plan, log, clock, boot, avail)
    marks.append(time.monotonic())
    log.line(
        f"max_total_num_tokens={model.max_total_num_tokens}, chunked_prefill_size={settings.chunked_prefill_size}, "
        f"max_prefill_tokens={settings.max_prefill_tokens}, max_running_requests={model.max_running_requests}, "
        f"context_len={settings.context_length}, available_gpu_mem={avail:.2f} GB",
        rank=0,
    )
    total = time.monotonic() - started
    log.line(startup_timings_line(marks[1] - marks[0], marks[2] - marks[1], total, marks[3] - marks[2], 0.0, total))
    boot.enter("warmup")


async def _init_distributed(plan: dict[str, float], log: SimLog, clock: SimClock, boot: BootState,
                            rendezvous: Callable[[], Awaitable[None]] | None = None) -> None:
    boot.enter("starting")
    log.all_ranks("Init torch distributed begin.")
    t0 = time.monotonic()
    if rendezvous is not None:
        await rendezvous()
    await clock.sleep(plan["dist"])
    boot.mem_used_gb = BASE_USAGE_GB
    log.all_ranks(f"Init torch distributed ends. elapsed={time.monotonic() - t0:.2f} s, mem usage={BASE_USAGE_GB:.2f} GB")


def _fail(log: SimLog, boot: BootState, first: str, rest: list[str], rank: int, why: str) -> StartupFailed:
    """SGLang's error text for a start-up fault, the boot marked failed; the exception to raise."""
    log.line(first, rank=rank)
    log.raw("".join(line + "\n" for line in rest))
    log.line("Received sigquit from a child process. It usually means the child failed.")
    boot.enter("failed")
    return StartupFailed(why)


async def _load_weights(
    settings: ServerSettings, model: PerfModel, plan: dict[str, float], log: SimLog, clock: SimClock, boot: BootState, avail: float
) -> float:
    """The shards loading (fault ``crash_load`` part-way); returns the memory left."""
    boot.enter("loading")
    log.all_ranks(f"Load weight begin. avail mem={avail:.2f} GB")
    t0 = time.monotonic()
    shard_s = plan["weights"] / NUM_SHARDS
    for shard in range(NUM_SHARDS + 1):
        if shard:
            await clock.sleep(shard_s)
        boot.progress = shard / NUM_SHARDS
        boot.mem_used_gb = BASE_USAGE_GB + model.weights_gb * boot.progress
        if shard % 4 == 0 or shard == NUM_SHARDS:
            log.raw(_shard_line(shard, time.monotonic() - t0))
        if settings.fault == "crash_load" and shard == NUM_SHARDS * 2 // 5:
            first, rest = crash_load_lines()
            raise _fail(log, boot, first, rest, log.ranks[3 % len(log.ranks)], "crash during weight load")
    avail -= model.weights_gb
    log.all_ranks(
        f"Load weight end. elapsed={time.monotonic() - t0:.2f} s, type={MODEL_CLASS}, quant=compressed-tensors, "
        f"avail mem={avail:.2f} GB, mem usage={model.weights_gb:.2f} GB."
    )
    if settings.enable_eplb:
        log.all_ranks(f"[EPLBManager] system started, will rebalance per {settings.eplb_rebalance_num_iterations} iterations.")
    return avail


async def _allocate_kv_cache(model: PerfModel, plan: dict[str, float], log: SimLog, clock: SimClock, boot: BootState, avail: float) -> float:
    boot.enter("kv")
    await clock.sleep(plan["kv"])
    tokens = model.max_total_num_tokens
    kv_gb = tokens * KV_BYTES_PER_TOKEN / 1024**3
    boot.mem_used_gb += kv_gb
    avail -= kv_gb
    log.all_ranks(f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {tokens}, KV size: {kv_gb:.2f} GB")
    log.all_ranks(f"Memory pool end. avail mem={avail:.2f} GB")
    return avail


async def _capture_cuda_graphs(
    settings: ServerSettings, model: PerfModel, plan: dict[str, float], log: SimLog, clock: SimClock, boot: BootState, avail: float
) -> float:
    """The tqdm bar of graph captures, largest batch first (fault ``oom_start`` part-way), then the draft's."""
    boot.enter("graph")
    log.all_ranks(f"Capture cuda graph begin. This can take up to several minutes. avail mem={avail:.2f} GB")
    sizes = capture_batch_sizes(settings.cuda_graph_max_bs)
    log.line(f"Capture cuda graph bs {sizes}", rank=0)
    t0 = time.monotonic()
    step_s = plan["graph"] / len(sizes)
    graph_gb = model.graph_gb
    oom_at = len(sizes) // 3 if settings.fault == "oom_start" else -1
    for i, bs in enumerate(reversed(sizes)):  # largest first, like SGLang
        now_avail = avail - graph_gb * i / len(sizes)
        log.raw("\r" + tqdm_bar(f"Capturing batches (bs={bs} avail_mem={now_avail:.2f} GB)", i, len(sizes), time.monotonic() - t0))
        if i == oom_at:
            log.raw("\n")
            first, rest = oom_lines(now_avail, 0.75 + bs * 0.004)
            raise _fail(log, boot, first, rest, 0, "out of memory at start-up")
        await clock.sleep(step_s)
        boot.progress = (i + 1) / len(sizes)
        boot.mem_used_gb += graph_gb / len(sizes)
    last = f"Capturing batches (bs={sizes[0]} avail_mem={avail - graph_gb:.2f} GB)"
    log.raw("\r" + tqdm_bar(last, len(sizes), len(sizes), time.monotonic() - t0) + "\n")
    avail -= graph_gb
    log.all_ranks(f"Capture cuda graph end. Time elapsed: {time.monotonic() - t0:.2f} s. mem usage={graph_gb:.2f} GB. avail mem={avail:.2f} GB.")
    if settings.speculative:  # the EAGLE/MTP draft model captures its own graphs
        draft_gb = 0.4
        log.all_ranks(f"Capture draft cuda graph begin. This can take up to several minutes. avail mem={avail:.2f} GB")
        t0 = time.monotonic()
        await clock.sleep(plan["draft_graph"])
        boot.mem_used_gb += draft_gb
        avail -= draft_gb
        log.all_ranks(f"Capture draft cuda graph end. Time elapsed: {time.monotonic() - t0:.2f} s. mem usage={draft_gb:.2f} GB. avail mem={avail:.2f} GB.")
    return avail


def _shard_line(n: int, elapsed: float) -> str:
    """SGLang's shard progress (tqdm with a ``\\n`` bar_format, so one line per refresh)."""
    pct = 100.0 * n / NUM_SHARDS
    rate = n / elapsed if elapsed > 0 and n else 0.0
    remaining = (NUM_SHARDS - n) / rate if rate > 0 else 0.0
    rate_s = f"{rate:5.2f}it/s" if rate else "?it/s"
    left = f"{int(remaining) // 60:02d}:{int(remaining) % 60:02d}" if rate else "?"
    el = f"{int(elapsed) // 60:02d}:{int(elapsed) % 60:02d}"
    return f"Loading safetensors checkpoint shards: {pct:3.0f}% Completed | {n}/{NUM_SHARDS} [{el}<{left}, {rate_s}]\n"
