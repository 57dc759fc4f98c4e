"""Request parsing and response bodies shaped like SGLang's OpenAI and native APIs.

Pure functions: the HTTP layer (``kimitui.sim.server``) calls them to turn a
JSON body into generation parameters and finished text into SGLang's JSON
(reference/sglang.md section 3).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from kimitui.sim.textgen import chat_prompt, plain_prompt

EOS_TOKEN_ID = 163586  # Kimi's <|im_end|>: SGLang reports it as matched_stop on a natural stop

MatchedStop = str | int | None
"""What SGLang reports as ``matched_stop``: the stop string hit, the EOS token id, or nothing (length)."""


class BadRequest(Exception):
    """A request SGLang would reject with 400; the message says which field."""


@dataclass
class GenParams:
    kind: str
    """``chat``, ``completion`` or ``generate``."""
    prompt_text: str
    prompt_tokens: int
    max_new_tokens: int | None
    ignore_eos: bool
    stop: tuple[str, ...]
    stream: bool
    include_usage: bool
    continuous_usage: bool
    model: str | None
    rid: str
    spec_details: bool = False
    """``return_spec_tokens_details``: add ``sglext.spec_tokens_details`` to the response."""
    labels: dict[str, str] | None = None
    """Custom metric labels from the request header, filtered to the allowed ones."""


def _stop_list(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(v for v in value if v)
    raise BadRequest("'stop' must be a string or a list of strings")


def _int_field(body: dict[str, Any], *names: str) -> int | None:
    for name in names:
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise BadRequest(f"'{name}' must be a non-negative integer, got {value!r}")
        return value
    return None


def parse_openai(body: Any, kind: str) -> GenParams:
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    if kind == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise BadRequest("'messages' must be a non-empty list of message objects")
        text, ntok = chat_prompt(messages)
    else:
        if "prompt" not in body:
            raise BadRequest("'prompt' is required")
        text, ntok = plain_prompt(body.get("prompt"))
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise BadRequest("'stream_options' must be an object")
    return GenParams(
        kind=kind,
        prompt_text=text,
        prompt_tokens=ntok,
        max_new_tokens=_int_field(body, "max_completion_tokens", "max_tokens"),
        ignore_eos=bool(body.get("ignore_eos", False)),
        stop=_stop_list(body.get("stop")),
        stream=bool(body.get("stream", False)),
        include_usage=bool(opts.get("include_usage", False)),
        continuous_usage=bool(opts.get("continuous_usage_stats", False)),
        model=body.get("model"),
        rid=uuid.uuid4().hex,
        spec_details=kind == "chat" and body.get("return_spec_tokens_details") is True,
    )


def parse_generate(body: Any) -> GenParams:
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    if body.get("text") is None and body.get("input_ids") is None:
        raise BadRequest("either 'text' or 'input_ids' is required")
    text, ntok = plain_prompt(body["text"] if body.get("text") is not None else body["input_ids"])
    sp = body.get("sampling_params") or {}
    if not isinstance(sp, dict):
        raise BadRequest("'sampling_params' must be an object")
    max_new = _int_field(sp, "max_new_tokens")
    return GenParams(
        kind="generate",
        prompt_text=text,
        prompt_tokens=ntok,
        max_new_tokens=128 if max_new is None else max_new,
        ignore_eos=bool(sp.get("ignore_eos", False)),
        stop=_stop_list(sp.get("stop")),
        stream=bool(body.get("stream", False)),
        include_usage=False,
        continuous_usage=False,
        model=None,
        rid=str(body.get("rid") or uuid.uuid4().hex),
    )


def usage(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": None,
        "reasoning_tokens": 0,
    }


def chat_response(p: GenParams, model: str, text: str, finish: str, matched: MatchedStop, completion: int) -> dict[str, Any]:
    return {
        "id": p.rid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "reasoning_content": None, "tool_calls": None},
                "logprobs": None,
                "finish_reason": finish,
                "matched_stop": matched,
            }
        ],
        "usage": usage(p.prompt_tokens, completion),
        "metadata": {"weight_version": "default"},
    }


def completion_response(p: GenParams, model: str, text: str, finish: str, matched: MatchedStop, completion: int) -> dict[str, Any]:
    return {
        "id": p.rid,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "matched_stop": matched}],
        "usage": usage(p.prompt_tokens, completion),
        "metadata": {"weight_version": "default"},
    }


def chat_chunk(p: GenParams, model: str, created: int, delta: dict[str, Any], finish: str | None = None, matched: MatchedStop = None) -> dict[str, Any]:
    return {
        "id": p.rid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, "matched_stop": matched}],
    }


def completion_chunk(p: GenParams, model: str, created: int, text: str, finish: str | None = None, matched: MatchedStop = None) -> dict[str, Any]:
    return {
        "id": p.rid,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "matched_stop": matched}],
    }


def spec_tokens_details(tally: Any, completion_tokens: int) -> dict[str, Any]:
    """0.5.23 ``entrypoints/openai/protocol.py`` ``SpecTokensDetails``, every field, from a request's counts.

    As ``managers/tokenizer_manager.py`` computes them: accept length = completion tokens / verify
    passes (the prefill's first token and the bonus tokens included), accept rate = correct drafts /
    (verify passes x (draft tokens - 1)).
    """
    return {
        "spec_accept_rate": tally.accept_rate,
        "spec_accept_length": completion_tokens / tally.verify_ct if tally.verify_ct else 0.0,
        "spec_cap_length": tally.cap_length,
        "spec_block_accept_length": 0.0,
        "spec_num_correct_drafts": tally.correct_drafts,
        "spec_num_proposed_drafts": tally.proposed_drafts,
        "spec_verify_ct": tally.verify_ct,
        "spec_correct_drafts_histogram": list(tally.correct_hist),
        "spec_cap_lens_histogram": list(tally.cap_hist),
    }


def sglext(details: dict[str, Any]) -> dict[str, Any]:
    """0.5.23 ``SglExt`` as ``model_dump_json`` writes it: every field, unset ones null."""
    return {"routed_experts": None, "cached_tokens_details": None, "spec_tokens_details": details,
            "input_ids": None, "output_ids": None}


def sglext_chunk(p: GenParams, model: str, created: int, details: dict[str, Any]) -> dict[str, Any]:
    """The streaming chunk that carries ``sglext`` (``choices: []``), before the usage chunk
    (0.5.23 ``entrypoints/openai/serving_chat.py`` ``_generate_chat_stream``)."""
    return {"id": p.rid, "object": "chat.completion.chunk", "created": created, "model": model, "choices": [],
            "sglext": sglext(details)}


def usage_chunk(p: GenParams, model: str, created: int, completion: int, obj: str) -> dict[str, Any]:
    return {"id": p.rid, "object": obj, "created": created, "model": model, "choices": [], "usage": usage(p.prompt_tokens, completion)}


def generate_body(p: GenParams, text: str, output_ids: list[int], finish: dict[str, Any] | None, e2e: float) -> dict[str, Any]:
    return {
        "text": text,
        "output_ids": output_ids,
        "meta_info": {
            "id": p.rid,
            "finish_reason": finish,
            "prompt_tokens": p.prompt_tokens,
            "weight_version": "default",
            "completion_tokens": len(output_ids),
            "cached_tokens": 0,
            "e2e_latency": round(e2e, 6),
        },
    }


def error_body(message: str, code: int = 400, err_type: str = "BadRequestError") -> dict[str, Any]:
    return {"object": "error", "message": message, "type": err_type, "param": None, "code": code}
