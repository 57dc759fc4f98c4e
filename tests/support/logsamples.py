"""Golden SGLang log lines (reference/sglang.md §1) with what the parser must make of them.

Each entry: (raw line, line_kind, severity, fields that must be present with these values).
The simulator emits the same formats; tests and the parser benchmark share this list.
"""

from __future__ import annotations

from typing import Any

Golden = tuple[str, str, str, dict[str, Any]]

ESC = "\x1b"

DECODE: list[Golden] = [
    # v0.4.6 form: "Decode batch. ", no cuda graph, no trailing comma
    (
        "[2025-04-01 10:00:00 TP0] Decode batch. #running-req: 8, #token: 37217, token usage: 0.13, "
        "gen throughput (token/s): 171.01, #queue-req: 0",
        "decode", "info",
        {"running_reqs": 8, "num_tokens": 37217, "token_usage": 0.13, "gen_throughput": 171.01,
         "queued_reqs": 0, "rank": "TP0", "ts": "2025-04-01 10:00:00"},
    ),
    # v0.4.6 with speculative accept len
    (
        "[2025-04-01 10:00:00 TP0] Decode batch. #running-req: 8, #token: 37217, token usage: 0.13, "
        "accept len: 2.90, gen throughput (token/s): 171.01, #queue-req: 0",
        "decode", "info", {"accept_len": 2.9, "gen_throughput": 171.01},
    ),
    # 2025-05 -> 07: cuda graph added
    (
        "[2025-06-01 10:00:00 TP0] Decode batch. #running-req: 8, #token: 37217, token usage: 0.13, "
        "accept len: 2.90, cuda graph: True, gen throughput (token/s): 171.01, #queue-req: 0",
        "decode", "info", {"cuda_graph": True, "graph_backend": "cuda", "queued_reqs": 0},
    ),
    # 2025-07 -> 10: trailing ", "
    (
        "[2025-08-01 10:00:00 TP0 EP0] Decode batch. #running-req: 8, #token: 37217, token usage: 0.13, "
        "cuda graph: False, gen throughput (token/s): 171.01, #queue-req: 3, ",
        "decode", "info", {"cuda_graph": False, "queued_reqs": 3, "rank": "TP0_EP0"},
    ),
    # 2025-10-23 -> 10-26: "Decode batch [1234], "
    (
        "[2025-10-24 10:00:00 TP0] Decode batch [1234], #running-req: 2, #token: 100, token usage: 0.00, "
        "cuda graph: True, gen throughput (token/s): 66.40, #queue-req: 0, ",
        "decode", "info", {"iter": 1234, "running_reqs": 2, "gen_throughput": 66.4},
    ),
    # DEC-2025: comma after "batch", trailing ", ", SGLANG_LOG_MS
    (
        "[2025-12-09 10:00:00.123 DP1 TP1 EP1] Decode batch, #running-req: 64, #token: 35840, token usage: 0.03, "
        "accept len: 2.87, accept rate: 0.62, cuda graph: True, gen throughput (token/s): 1702.55, #queue-req: 12, ",
        "decode", "info",
        {"ts": "2025-12-09 10:00:00.123", "ranks": {"dp": 1, "tp": 1, "ep": 1}, "rank": "DP1_TP1_EP1",
         "accept_rate": 0.62, "queued_reqs": 12},
    ),
    # HEAD-2026: no trailing comma
    (
        "[2026-05-28 10:05:13 TP0 EP0] Decode batch, #running-req: 64, #token: 35840, token usage: 0.03, "
        "cuda graph: True, gen throughput (token/s): 1702.55, #queue-req: 12",
        "decode", "info", {"running_reqs": 64, "token_usage": 0.03, "gen_throughput": 1702.55, "queued_reqs": 12},
    ),
    # all six rank tags, MFU + occupancy + an unknown key
    (
        "[2026-05-28 10:05:13 DP2 PP1 ATTN_CP0 MOE_DP1 TP2 EP2] Decode batch, #running-req: 4, #token: 10, "
        "token usage: 0.01, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 0, "
        "est. decode TFLOPS/s (per GPU): 12.50, fwd occupancy: 87.25%, brand-new key: xyz",
        "decode", "info",
        {"ranks": {"dp": 2, "pp": 1, "attn_cp": 0, "moe_dp": 1, "tp": 2, "ep": 2},
         "rank": "DP2_PP1_ATTN_CP0_MOE_DP1_TP2_EP2",
         "est_tflops": 12.5, "fwd_occupancy": 87.25, "brand_new_key": "xyz"},
    ),
    # hybrid SWA pools: token_usage is the max of the pools
    (
        "[2026-05-28 10:05:13 TP0] Decode batch, #running-req: 4, #full token: 100, full token usage: 0.10, "
        "#swa token: 50, swa token usage: 0.30, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 0",
        "decode", "info", {"full_tokens": 100, "swa_token_usage": 0.3, "token_usage": 0.3},
    ),
    # PD decode + npu graph label
    (
        "[2026-05-28 10:05:13 TP0] Decode batch, #running-req: 4, #token: 10, token usage: 0.01, "
        "pre-allocated usage: 0.20, #prealloc-req: 1, #transfer-req: 2, #retracted-req: 0, npu graph: False, "
        "gen throughput (token/s): 10.00, #queue-req: 0",
        "decode", "info",
        {"prealloc_usage": 0.2, "prealloc_reqs": 1, "transfer_reqs": 2, "cuda_graph": False, "graph_backend": "npu"},
    ),
]

PREFILL: list[Golden] = [
    (
        "[2025-04-01 10:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 28, #cached-token: 0, "
        "token usage: 0.00, #running-req: 0, #queue-req: 0",
        "prefill", "info",
        {"new_seq": 1, "new_token": 28, "cached_token": 0, "token_usage": 0.0, "running_reqs": 0, "queued_reqs": 0},
    ),
    (
        "[2025-12-09 10:00:00 TP0] Prefill batch, #new-seq: 1, #new-token: 28, #cached-token: 0, "
        "token usage: 0.00, #running-req: 0, #queue-req: 0, ",
        "prefill", "info", {"new_token": 28, "queued_reqs": 0},
    ),
    # 2026-01-30 -> 03-19: input throughput then cuda graph last
    (
        "[2026-02-10 10:00:00 TP0] Prefill batch, #new-seq: 2, #new-token: 512, #cached-token: 64, "
        "token usage: 0.01, #running-req: 3, #queue-req: 1, input throughput (token/s): 9000.50, cuda graph: True",
        "prefill", "info", {"input_throughput": 9000.5, "cuda_graph": True},
    ),
    # HEAD-2026 with #pending-token
    (
        "[2026-05-28 10:05:12 TP0 EP0] Prefill batch, #new-seq: 4, #new-token: 8192, #cached-token: 1536, "
        "token usage: 0.03, #running-req: 60, #queue-req: 12, #pending-token: 40960, cuda graph: False, "
        "input throughput (token/s): 15873.41",
        "prefill", "info",
        {"new_seq": 4, "new_token": 8192, "cached_token": 1536, "pending_token": 40960, "cuda_graph": False,
         "input_throughput": 15873.41, "running_reqs": 60, "queued_reqs": 12},
    ),
]

STARTUP: list[Golden] = [
    (
        "[2026-05-28 10:00:00] server_args=ServerArgs(model_path='moonshotai/Kimi-K2.6', tp_size=8, "
        "mem_fraction_static=0.88, enable_eplb=False, chunked_prefill_size=None, ep_size=8, dp_size=1)",
        "startup", "info",
        {"step": "args", "args": {"model_path": "moonshotai/Kimi-K2.6", "tp_size": 8, "mem_fraction_static": 0.88,
                                  "enable_eplb": False, "chunked_prefill_size": None, "ep_size": 8, "dp_size": 1}},
    ),
    ("[2026-05-28 10:00:07 TP0 EP0] Init torch distributed begin.", "startup", "info",
     {"step": "dist_init", "phase": "begin"}),
    ("[2026-05-28 10:00:11 TP0 EP0] Load weight begin. avail mem=138.09 GB", "startup", "info",
     {"step": "weights", "phase": "begin", "progress": 0.0, "avail_mem_gb": 138.09}),
    ("Loading safetensors checkpoint shards:  45% Completed | 29/64 [00:40<00:50,  1.43s/it]", "startup", "info",
     {"step": "weights", "i": 29, "n": 64, "progress": 29 / 64}),
    (
        "[2026-05-28 10:03:02 TP0 EP0] Load weight end. elapsed=171.30 s, type=DeepseekV3ForCausalLM, quant=fp8, "
        "fmt=e4m3, avail mem=55.92 GB, mem usage=82.17 GB.",
        "startup", "info",
        {"step": "weights", "phase": "end", "progress": 1.0, "elapsed_s": 171.3, "type": "DeepseekV3ForCausalLM",
         "quant": "fp8", "mem_usage_gb": 82.17, "avail_mem_gb": 55.92},
    ),
    (
        "[2025-12-09 10:03:02 TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, "
        "avail mem=55.92 GB, mem usage=82.17 GB.",
        "startup", "info", {"step": "weights", "phase": "end", "mem_usage_gb": 82.17},
    ),
    ("[2026-05-28 10:03:04 TP0 EP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1048576, KV size: 34.30 GB",
     "startup", "info", {"step": "kv_cache", "kv_tokens": 1048576, "kv_size_gb": 34.3, "dtype": "torch.bfloat16"}),
    ("[2026-05-28 10:03:04 TP0] KV Cache is allocated. dtype: torch.float16, #tokens: 5000, K size: 1.50 GB, V size: 1.50 GB",
     "startup", "info", {"step": "kv_cache", "k_size_gb": 1.5, "v_size_gb": 1.5}),
    ("[2026-05-28 10:03:04 TP0 EP0] Memory pool end. avail mem=20.41 GB", "startup", "info",
     {"step": "kv_cache", "phase": "pool", "avail_mem_gb": 20.41}),
    ("[2026-05-28 10:03:05 TP0 EP0] Capture cuda graph begin. This can take up to several minutes. avail mem=20.17 GB",
     "startup", "info", {"step": "cuda_graph", "phase": "begin", "progress": 0.0, "graph": "main"}),
    ("[2026-05-28 10:03:05 TP0 EP0] Capture cuda graph bs [1, 2, 4, 8, 12, 16]", "startup", "info",
     {"step": "cuda_graph", "phase": "plan", "batch_sizes": [1, 2, 4, 8, 12, 16], "n": 6}),
    # tqdm with \r redraws and no timestamp prefix: the last state wins
    ("Capturing batches (bs=512 avail_mem=20.12 GB):   0%|          | 0/52 [00:00<?, ?it/s]\r"
     "Capturing batches (bs=480 avail_mem=20.12 GB):  23%|██▎       | 12/52 [00:03<00:09,  4.1it/s]",
     "startup", "info", {"step": "cuda_graph", "phase": "progress", "bs": 480, "i": 12, "n": 52, "progress": 12 / 52}),
    ("Capturing num tokens (num_tokens=4096 avail_mem=19.00 GB):  50%|█████     | 29/58 [00:05<00:05,  5.0it/s]",
     "startup", "info", {"step": "cuda_graph", "graph": "piecewise", "num_tokens": 4096, "i": 29, "n": 58}),
    ("[2026-05-28 10:03:37 TP0 EP0] Capture cuda graph end. Time elapsed: 32.12 s. mem usage=1.53 GB. avail mem=18.64 GB.",
     "startup", "info", {"step": "cuda_graph", "phase": "end", "progress": 1.0, "elapsed_s": 32.12, "mem_usage_gb": 1.53}),
    ("[2026-05-28 10:03:37 TP0] Capture draft cuda graph end. Time elapsed: 3.00 s. mem usage=0.10 GB. avail mem=18.00 GB.",
     "startup", "info", {"step": "cuda_graph", "phase": "end", "graph": "draft"}),
    (
        "[2026-05-28 10:03:38 TP0 EP0] max_total_num_tokens=1048576, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=2048, context_len=163840, available_gpu_mem=18.64 GB",
        "startup", "info",
        {"step": "max_tokens", "max_total_num_tokens": 1048576, "max_running_requests": 2048, "context_len": 163840,
         "available_gpu_mem": 18.64},
    ),
    ("[2026-05-28 10:03:39] INFO:     Started server process [12345]", "startup", "info",
     {"step": "uvicorn", "pid": 12345}),
    ("[2026-05-28 10:03:39] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)", "startup", "info",
     {"step": "uvicorn", "url": "http://0.0.0.0:30000"}),
    ("[2026-05-28 10:03:41] The server is fired up and ready to roll!", "startup", "info",
     {"step": "ready", "progress": 1.0}),
]

ACCESS: list[Golden] = [
    ('[2026-05-28 10:05:13] INFO:     127.0.0.1:55812 - "POST /v1/chat/completions HTTP/1.1" 200 OK', "access", "info",
     {"client": "127.0.0.1:55812", "method": "POST", "path": "/v1/chat/completions", "status": 200}),
    # ANSI colour from a TTY
    (f'[2026-05-28 10:05:13] {ESC}[32mINFO{ESC}[0m:     127.0.0.1:40000 - "{ESC}[1mGET /health HTTP/1.1{ESC}[0m" {ESC}[32m200 OK{ESC}[0m',
     "access", "info", {"client": "127.0.0.1:40000", "method": "GET", "path": "/health", "status": 200}),
    ('[2026-05-28 10:05:13] INFO:     127.0.0.1:40001 - "GET /health HTTP/1.1" 503 Service Unavailable', "access", "error",
     {"status": 503}),
]

EPLB: list[Golden] = [
    ("[2026-05-28 11:00:00 TP0 EP0] [EPLBManager] system started, will rebalance per 1000 iterations.", "eplb", "info",
     {"phase": "init", "every_iters": 1000}),
    ("[2026-05-28 11:00:03 TP0 EP0] [EPLBManager] rebalance start", "eplb", "info", {"phase": "start"}),
    ("[2026-05-28 11:00:05 DP0 TP0 EP0] [EPLBManager] rebalance end time=1.812s", "eplb", "info",
     {"phase": "end", "duration_s": 1.812}),
    ("[2026-05-28 11:00:05 TP0 EP0] [EPLBManager] rebalance end", "eplb", "info", {"phase": "end", "duration_s": None}),
    ("[2026-05-28 11:00:05 TP0 EP0] [EPLBManager] Skipped ep rebalancing: current GPU utilization 0.93 > minimum "
     "rebalance threshold 0.90", "eplb", "info", {"phase": "skipped", "utilization": 0.93, "threshold": 0.9}),
]

PROBLEMS: list[Golden] = [
    ("[2026-05-28 10:09:40 TP0 EP0] KV cache pool is full. Retract requests. #retracted_reqs: 3, "
     "#new_tokens_gained: 24576, #new_token_ratio: 0.4200 -> 0.5100", "warning", "warning",
     {"error": "kv_retract", "retracted_reqs": 3, "new_tokens_gained": 24576, "new_token_ratio_to": 0.51}),
    ("[2026-05-28 11:20:00 TP5 EP5] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
     "error", "critical", {"error": "watchdog", "timeout_s": 300.0, "component": "Scheduler", "rank": "TP5_EP5"}),
    ("[2025-12-09 11:20:00 TP5] Watchdog timeout (self.watchdog_timeout=300.0)", "error", "critical",
     {"error": "watchdog", "timeout_s": 300.0}),
    ("[2026-05-28 11:20:05] SIGQUIT received. signum=3, frame=<frame at 0x7f>. It usually means one child failed.",
     "error", "critical", {"error": "sigquit"}),
    ("[2026-05-28 11:20:05] Received sigquit from a child process. It usually means the child failed.", "error",
     "critical", {"error": "sigquit"}),
    ("[2026-05-28 11:20:00 TP3 EP3] Scheduler hit an exception: Traceback (most recent call last):", "error", "error",
     {"error": "scheduler_exception", "rank": "TP3_EP3"}),
    ("[2026-05-28 11:20:00] Subprocess scheduler_3 (pid=4242) crashed with exit code -6. Triggering SIGQUIT for cleanup...",
     "error", "critical", {"error": "subprocess_crash", "pid": 4242, "exit_code": -6}),
    ("[2026-05-28 10:05:00 TP0] Prefill out of memory. Try to lower your batch size.", "error", "error",
     {"error": "oom", "phase": "prefill"}),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 484.00 MiB. GPU 0 has a total capacity of 31.36 GiB",
     "error", "error", {"error": "oom", "tried_alloc": 484.0, "tried_alloc_unit": "MiB"}),
    ("[2026-05-28 10:00:30 TP0] Not enough memory. Please try to increase --mem-fraction-static. Current value: "
     "mem_fraction_static=0.8", "error", "error", {"error": "oom"}),
    ("what():  [PG 3 Rank 5] Process group watchdog thread terminated with exception: [Rank 5] Watchdog caught collective "
     "operation timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, NumelIn=19008, NumelOut=152064, "
     "Timeout(ms)=600000) ran for 600020 milliseconds before timing out.", "error", "critical",
     {"error": "nccl", "timeout_s": 600.0}),
    ("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)", "error", "error",
     {"error": "nccl"}),
    ("[2026-05-28 10:00:09 TP0] CustomAllreduce is disabled because it's not supported on more than two PCIe-only GPUs. "
     "To silence this warning, specify disable_custom_all_reduce=True explicitly.", "warning", "warning",
     {"error": "custom_allreduce"}),
    ("[2026-05-28 10:00:30] Health check failed. Server couldn't get a response from detokenizer for last 20 seconds. "
     "tic start time: 10:00:10. last_heartbeat time: 10:00:09", "error", "error", {"error": "health_check"}),
    ("[2026-05-28 10:03:10 TP0] Capture cuda graph failed: CUDA out of memory.", "error", "error",
     {"error": "cuda_graph_capture"}),
    ("[2026-05-28 10:00:30] WARNING:  Invalid HTTP request received.", "warning", "warning", {"error": "logged"}),
    # the last line of a traceback, and Python warnings, carry no prefix
    ("ValueError: tp_size 8 must be divisible by ep_size 3", "error", "error",
     {"error": "exception", "exception": "ValueError"}),
    ("torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients.", "error", "error",
     {"error": "exception", "exception": "DistStoreError"}),
    ("/usr/lib/python3/site-packages/torch/cuda/__init__.py:61: FutureWarning: The pynvml package is deprecated.",
     "warning", "warning", {"error": "deprecated"}),
    ("/usr/lib/python3/site-packages/torch/cuda/__init__.py:61: UserWarning: Can't initialize NVML", "warning",
     "warning", {"error": "user_warning"}),
    ("/sglang/srt/utils.py:12: RuntimeWarning: overflow encountered", "warning", "warning",
     {"error": "python_warning", "exception": "RuntimeWarning"}),
    ("FutureWarning: `resume_download` will be removed in version 1.0.0.", "warning", "warning",
     {"error": "python_warning", "exception": "FutureWarning"}),
    ('  File "/sglang/srt/managers/scheduler.py", line 2100, in run_scheduler_process', "plain", "info", {}),
]

PREFIXES: list[Golden] = [
    # custom logging dictConfig (PR #11854 form)
    ("2025-10-20 03:02:22 INFO 31223 [DP3 TP3 EP3 scheduler_metrics_mixin.py:222] Decode batch. #running-req: 5, "
     "#token: 900, token usage: 0.01, cuda graph: True, gen throughput (token/s): 300.00, #queue-req: 0, ",
     "decode", "info",
     {"ts": "2025-10-20 03:02:22", "rank": "DP3_TP3_EP3", "running_reqs": 5, "gen_throughput": 300.0}),
    ("2025-10-20 03:02:22 ERROR 31223 [TP1 scheduler.py:10] something odd happened", "error", "error",
     {"error": "logged", "rank": "TP1"}),
    # journalctl -o short-iso around an SGLang line
    ("2026-05-28T10:05:13+0000 gpu-host python3[4242]: [2026-05-28 10:05:13 TP0 EP0] Decode batch, #running-req: 1, "
     "#token: 10, token usage: 0.00, cuda graph: True, gen throughput (token/s): 65.00, #queue-req: 0",
     "decode", "info", {"running_reqs": 1, "gen_throughput": 65.0, "rank": "TP0_EP0"}),
    # colour around the whole line
    (f"{ESC}[33m[2026-05-28 10:05:13 TP0] Decode batch, #running-req: 1, #token: 10, token usage: 0.00, "
     f"cuda graph: True, gen throughput (token/s): 65.00, #queue-req: 0{ESC}[0m", "decode", "info",
     {"running_reqs": 1, "queued_reqs": 0}),
]

PLAIN: list[Golden] = [
    ("[2026-05-28 10:00:09 TP0] Using default HuggingFace chat template with detected content format: openai",
     "plain", "info", {"rank": "TP0"}),
    ("", "plain", "info", {}),
    ("hello world", "plain", "info", {}),
    ("[not a timestamp] Decode batchy", "plain", "info", {}),
]

ALL: list[Golden] = DECODE + PREFILL + STARTUP + ACCESS + EPLB + PROBLEMS + PREFIXES + PLAIN


def realistic_mix() -> list[str]:
    """A serving server's log: decode, prefill and access lines, plus every golden line once
    (startup, EPLB, errors, odd prefixes: about a quarter of the mix, far more than in steady state)."""
    lines = [g[0] for g in DECODE[5:7]] * 60 + [g[0] for g in PREFILL[2:]] * 30
    lines += [ACCESS[0][0]] * 90 + [g[0] for g in ALL]
    return lines
