"""Injected faults: which request fails how, and the error text SGLang prints.

Per-request faults (``http_500``, ``drop``, ``stall``) hit a request with
probability ``fault_rate``, decided by a seeded RNG in arrival order so a test
run is reproducible.  One-shot faults (``crash_load``, ``oom_start``, ``hang``)
are acted out by the start-up sequence and the scheduler.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from kimitui.sim.settings import ServerSettings

DEFAULT_STALL_S = 10.0
"""Simulated seconds a ``stall`` fault holds one request mid-stream (``[sim.tuning] stall_s``)."""


@dataclass(frozen=True)
class RequestFault:
    kind: str | None = None
    at_token: int | None = None
    stall_s: float = 0.0


class FaultPlan:
    def __init__(self, settings: ServerSettings) -> None:
        self.s = settings
        self._rng = random.Random(settings.seed * 104729 + 3)
        self.stall_s = float(settings.tuning.get("stall_s", DEFAULT_STALL_S))

    def for_request(self, target_tokens: int) -> RequestFault:
        """Draw this request's fault (or none); always consumes the same randomness."""
        roll, where = self._rng.random(), self._rng.random()
        kind = self.s.fault
        if kind not in ("http_500", "drop", "stall") or roll >= self.s.fault_rate:
            return RequestFault()
        if kind == "http_500":
            return RequestFault(kind="http_500")
        if target_tokens < 2:
            return RequestFault()
        at = 1 + int(where * (target_tokens - 1))
        return RequestFault(kind=kind, at_token=at, stall_s=self.stall_s if kind == "stall" else 0.0)


def crash_load_lines() -> tuple[str, list[str]]:
    """A corrupt checkpoint shard while loading weights: the header and the traceback."""
    traceback = [
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/managers/scheduler.py", line 3112, in run_scheduler_process',
        "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)",
        '  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/model_executor/model_runner.py", line 812, in load_model',
        "    self.model = self.loader.load_model(model_config=self.model_config, device_config=DeviceConfig(self.device))",
        '  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/model_loader/weight_utils.py", line 611, in safetensors_weights_iterator',
        '    with safe_open(st_file, framework="pt") as f:',
        "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer",
    ]
    return "Scheduler hit an exception: " + traceback[0], traceback[1:]


def oom_lines(avail_gb: float, want_gb: float) -> tuple[str, list[str]]:
    """CUDA OOM during CUDA graph capture, with SGLang's advice block."""
    free_mib = max(12.0, avail_gb * 1024 * 0.02)
    text = [
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/model_executor/cuda_graph_runner.py", line 402, in __init__',
        "    self.capture()",
        '  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/model_executor/cuda_graph_runner.py", line 516, in capture',
        "    ) = self.capture_one_batch_size(bs, forward, stream_idx)",
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {want_gb * 1024:.2f} MiB. GPU 0 has a total capacity "
        f"of 95.59 GiB of which {free_mib:.2f} MiB is free. Including non-PyTorch memory, this process has 95.57 GiB memory in use. "
        "Of the allocated memory 93.10 GiB is allocated by PyTorch, and 1.21 GiB is reserved by PyTorch but unallocated.",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/managers/scheduler.py", line 3112, in run_scheduler_process',
        "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)",
        "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate "
        f"{want_gb * 1024:.2f} MiB. GPU 0 has a total capacity of 95.59 GiB of which {free_mib:.2f} MiB is free.",
        "Possible solutions:",
        "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
        "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)",  # 0.5.23 runner_backend_utils' hint
        "3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled. (Not recommended. Huge performance loss)",
        "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ",
    ]
    return "Scheduler hit an exception: " + text[0], text[1:]


def internal_error_body(message: str = "Internal server error") -> dict:
    """SGLang's OpenAI-style error object (serving_base.create_error_response)."""
    return {"object": "error", "message": message, "type": "InternalServerError", "param": None, "code": 500}
