"""SGLang's information and admin endpoints, as a mixin of :class:`kimitui.sim.server.SimServer`.

/health and /health_generate (503 while starting or hung), /v1/models,
/server_info (+ deprecated /get_server_info), /model_info, /v1/loads,
/metrics (only with enable_metrics) and /flush_cache; shapes from
reference/sglang.md section 3.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from kimitui.sglang.flag_check import DEFAULT_VERSION
from kimitui.sglang.launch_command import parse_launch_command
from kimitui.sim.perf_model import GPU_TOTAL_GB, capture_batch_sizes
from kimitui.sim.prometheus import CONTENT_TYPE, GRAPH_PHASES
from kimitui.sim.real_server_args import INTERNAL_ONLY, MODEL_INFO_EMBEDDING, SERVER_ARGS
from kimitui.sim.scheduler import SchedStats
from kimitui.sim.server_state import SimServerState

SGLANG_VERSION = DEFAULT_VERSION
"""The version ``/server_info`` reports: the one whose parser the simulator plays (one constant for both)."""
HEALTH_TIMEOUT_S = 20.0
GPU_SERVER_ARGS: dict[str, Any] = {"device": "cuda", "attention_backend": None}
"""The real defaults came from a CPU server (``device: cpu``, ``attention_backend: intel_amx``); the simulated
one is a GPU server whose attention backend SGLang picks per GPU (not modelled: left unresolved)."""
TOP_LEVEL_ONLY = ("custom_sigquit_handler", "kv_events")
"""Args the real answer has at the top level but not in ``internal_states`` (the scheduler's copy)."""
SIM_ONLY_KEYS = {
    "launch_command": "0.5.23 reports the flags really passed (utils/common.py build_server_info); 0.5.18 does not",
    "sim": "the simulator says it is one", "sim_profile": "the simulator's profile",
    "sim_time_scale": "the simulator's clock", "sim_seed": "the simulator's seed", "sim_fault": "the simulator's fault",
    "sim_fault_rate": "the simulator's fault rate",
}
"""Top-level ``/server_info`` keys only the simulator has, and why (the comparison test allows them)."""


def launched_args(command: str, like: dict[str, Any]) -> dict[str, Any]:
    """The profile's own flags (its launch command) as ``/server_info`` values, typed like the defaults."""
    out: dict[str, Any] = {}
    for key, value in parse_launch_command(command).items() if command else ():
        default = like.get(key)
        if isinstance(value, str) and isinstance(default, (bool, int, float)):
            try:
                value = type(default)(float(value)) if not isinstance(default, bool) else value.lower() == "true"
            except ValueError:
                pass
        out[key] = value
    return out


def _still(stats: SchedStats) -> bool:
    """Is the scheduler still frozen (read afresh: a wait may have ended it)."""
    return stats.frozen


class InfoRoutes(SimServerState):
    """Endpoints that report on the server; they never generate."""

    async def health(self, request: Request) -> Response:
        if not self.ready or self.sched is None:
            return Response(status_code=503)
        stats = self.sched.stats
        if stats.frozen:  # 0.5.23 http_server.py health_generate: no answer within the timeout
            tic = time.strftime("%H:%M:%S")
            waited = 0.0
            while waited < HEALTH_TIMEOUT_S and _still(stats):
                await self.clock.sleep(1.0)
                waited += 1.0
            if _still(stats):
                last = time.strftime("%H:%M:%S", time.localtime(stats.frozen_since))
                self.log.line(
                    f"Health check failed. Server couldn't get a response from detokenizer for last "
                    f"{int(HEALTH_TIMEOUT_S)} seconds. tic start time: {tic}. last_heartbeat time: {last}"
                )
                return Response(status_code=503)
            return Response(status_code=200)
        if self.sched.stats.hung:
            tic = time.strftime("%H:%M:%S")
            await self.clock.sleep(HEALTH_TIMEOUT_S)
            self.log.line(
                f"Health check failed. Server couldn't get a response from detokenizer for last "
                f"{int(HEALTH_TIMEOUT_S)} seconds. tic start time: {tic}. last_heartbeat time: {tic}"
            )
            return Response(status_code=503)
        return Response(status_code=200)

    def _card(self) -> dict[str, Any]:
        name = self.s.served_model_name
        return {"id": name, "object": "model", "created": int(time.time()), "owned_by": "sglang", "root": name, "parent": None, "max_model_len": self.s.context_length}

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [self._card()]})

    async def model_card(self, request: Request) -> Response:
        if request.path_params["model_id"] != self.s.served_model_name:
            msg = f"The model `{request.path_params['model_id']}` does not exist."
            return JSONResponse({"error": {"message": msg, "type": "invalid_request_error", "param": "model", "code": "model_not_found"}}, status_code=404)
        return JSONResponse(self._card())

    def server_args_dict(self) -> dict[str, Any]:
        """Every ``ServerArgs`` field, as the real server reports them: its defaults (the real 0.5.18
        answer's), the profile's own flags over them, then what the simulator resolved itself."""
        args = dict(SERVER_ARGS) | GPU_SERVER_ARGS
        args.update(launched_args(self.s.launch_command, args))
        args |= self.s.server_args() | {"port": self.port}
        # the resolved decode graphs' batch sizes are in cuda_graph_config; cuda_graph_max_bs_decode is what was asked
        decode = dict(args["cuda_graph_config"]["decode"])
        decode.update(max_bs=self.s.cuda_graph_max_bs, bs=capture_batch_sizes(self.s.cuda_graph_max_bs),
                      backend="disabled" if self.s.disable_cuda_graph else "full")
        args["cuda_graph_config"] = {**args["cuda_graph_config"], "decode": decode}
        return args

    def server_info_dict(self) -> dict[str, Any]:
        args = self.server_args_dict()
        st = self.sched.stats if self.sched else None
        internal = {k: v for k, v in args.items() if k not in TOP_LEVEL_ONLY} | INTERNAL_ONLY
        plan = self.model.startup_plan()
        scheduler_s = sum(v for k, v in plan.items() if k != "warmup")
        startup = {"load_weight": plan["weights"], "kv_cache_allocation": plan["kv"], "scheduler_e2e": scheduler_s,
                   "cuda_graph": {phase: (plan["graph"] if phase == "decode" else 0.0) for phase in GRAPH_PHASES}}
        graphs = {phase: 0.0 for phase in GRAPH_PHASES}
        graphs["decode"] = round(self.model.graph_gb, 3)
        internal.update(
            last_gen_throughput=round(st.last_gen_throughput, 2) if st else 0.0,
            memory_usage={  # 0.5.18's shape: the graphs' memory per capture phase
                "weight": round(self.model.weights_gb, 3),
                "kvcache": round(self.model.kv_gb, 3),
                "startup_available": GPU_TOTAL_GB,
                "token_capacity": self.model.max_total_num_tokens,
                "token_capacity_swa": None,
                "graph": graphs,
            },
            startup_time=startup,
            effective_max_running_requests_per_dp=self.model.max_running_requests,
        )
        if self.s.speculative:
            internal["avg_spec_accept_length"] = round(st.spec_accept_length, 3) if st else 0.0
        return args | {
            "status": "ready" if self.ready else "starting",
            "max_total_num_tokens": self.model.max_total_num_tokens,
            "max_req_input_len": self.s.context_length - 6,
            "startup_time": startup | {"tokenizer_e2e": scheduler_s + plan["warmup"]},
            "internal_states": [internal],
            "version": SGLANG_VERSION,
            # 0.5.23 utils/common.py build_server_info: what was actually asked for (server_args.launch_command)
            "launch_command": self.s.launch_command or None,
            "kv_events": None,
            "sim": True,
            "sim_profile": self.s.name,
            "sim_time_scale": self.s.time_scale,
            "sim_seed": self.s.seed,
            "sim_fault": self.s.fault,
            "sim_fault_rate": self.s.fault_rate,
        }

    async def server_info(self, request: Request) -> Response:
        return JSONResponse(self.server_info_dict())

    async def server_info_deprecated(self, request: Request) -> Response:
        self.log.line("Endpoint '/get_server_info' is deprecated and will be removed in a future version. Please use '/server_info' instead.")
        return await self.server_info(request)

    async def model_info(self, request: Request) -> Response:
        return JSONResponse(
            {
                "model_path": self.s.model_path,
                "served_model_name": self.s.served_model_name,
                "tokenizer_path": self.s.model_path,
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
                "load_format": "auto",
                "reasoning_parser": None,
                "tool_call_parser": None,
                "has_image_understanding": False,
                "has_audio_understanding": False,
                "model_type": "kimi_k25",
                "architectures": ["KimiK25ForConditionalGeneration"],
                "embedding": MODEL_INFO_EMBEDDING,
            }
        )

    async def model_info_deprecated(self, request: Request) -> Response:
        self.log.line("Endpoint '/get_model_info' is deprecated and will be removed in a future version. Please use '/model_info' instead.")
        return await self.model_info(request)

    async def loads(self, request: Request) -> Response:
        """0.5.23 ``entrypoints/v1_loads.py``: ``include`` (core, memory, spec, lora, disagg, queues, all;
        default all) picks the sections, an unknown one is a 400 (``LoadSnapshot.to_dict``)."""
        raw = request.query_params.get("include")
        include = {x.strip() for x in raw.split(",")} if raw else None
        valid = {"core", "memory", "spec", "lora", "disagg", "queues", "all"}
        if include is not None and not include <= valid:
            return JSONResponse({"detail": f"Invalid include sections: {include - valid}. Valid options: {sorted(valid)}"},
                                status_code=400)
        st = self.sched.stats if self.sched else None
        running = st.running if st else 0
        waiting = st.queue if st else 0
        used = st.kv_tokens if st else 0
        total = self.model.max_total_num_tokens
        thr = round(st.last_gen_throughput, 2) if st else 0.0
        load: dict[str, object] = {
            "dp_rank": 0,
            "num_running_reqs": running,
            "num_waiting_reqs": waiting,
            "num_used_tokens": used,
            "num_total_tokens": total,
            "max_total_num_tokens": total,
            "token_usage": round(used / total, 4),
            "gen_throughput": thr,
            "cache_hit_rate": 0.0,
            "utilization": round(min(1.0, running / max(1, self.model.max_running_requests)), 4),
            "max_running_requests": self.model.max_running_requests,
            "num_total_reqs": running + waiting,
            # what the real 0.5.18 reports besides (tiny-qwen3moe/v1_loads.txt): the sim's pool, memory, queues
            "timestamp": time.time(),
            "num_waiting_uncached_tokens": sum(r.kv_tokens for r in self.sched.waiting) if self.sched else 0,
            "num_active_tokens": used,
            "total_prefill_uncached_tokens": st.prefill_tokens_total if st else 0,
            "memory": {"weight_gb": round(self.model.weights_gb, 3), "kv_cache_gb": round(self.model.kv_gb, 3),
                       "graph_gb": round(self.model.graph_gb, 3), "token_capacity": total},
            "disaggregation": {"mode": self.s.disaggregation_mode},
            "queues": {"waiting": waiting, "grammar": 0, "paused": 0, "retracted": 0, "prealloc_ready": 0},
        }
        if self.s.speculative and st is not None and (include is None or include & {"all", "spec"}):
            load["speculative"] = {"accept_length": round(st.spec_accept_length, 4),
                                   "accept_rate": round(st.spec_accept_rate, 4)}
        return JSONResponse(
            {
                "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z",
                "version": SGLANG_VERSION,
                "accelerator": None,
                "num_accelerators": self.s.tp_size,
                "dp_rank_count": 1,
                "loads": [load],
                "aggregate": {
                    "total_running_reqs": running,
                    "total_waiting_reqs": waiting,
                    "total_reqs": running + waiting,
                    "total_used_tokens": used,
                    "total_tokens": total,
                    "avg_token_usage": load["token_usage"],
                    "avg_throughput": thr,
                    "avg_utilization": load["utilization"],
                },
            }
        )

    async def metrics_endpoint(self, request: Request) -> Response:
        if self.metrics is None or self.sched is None:
            return PlainTextResponse("Not Found", status_code=404)
        return Response(self.metrics.render(self.sched.stats, self.sched.balance, self.pd.stats if self.pd else None),
                        media_type=CONTENT_TYPE)

    async def flush_cache(self, request: Request) -> Response:
        text = (
            "Cache flushed.\nPlease check backend logs for more details. "
            "(When there are running or waiting requests, the operation will not be performed.)\n"
        )
        sched = self.sched
        if sched is None or not sched.idle:
            queue, running = (len(sched.waiting), len(sched.running)) if sched else (0, 0)
            self.log.line(f"Cache not flushed because there are pending requests. #queue-req: {queue}, #running-req: {running}", rank=0)
            return PlainTextResponse(text, status_code=400)
        self.log.line("Cache flushed successfully!", rank=0)
        return PlainTextResponse(text)
