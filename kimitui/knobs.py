"""Which setting names are knobs: the one rule for runtime state and secrets.

A knob is a launch setting: what the server was started with.  Two kinds of name are never knobs, and
every knob diff (the A/B comparison, the confound guard, the autopilot's plan) leaves them out:

* runtime state: what ``/server_info`` reports that the server computes or measures itself (``status``
  goes ``starting`` -> ``ready`` under a sweep; ``last_gen_throughput`` is a figure, not a setting);
* secrets: a profile's ``[env]`` may hold tokens, and any setting whose name says key, token, secret or
  password holds one.  A secret's value is shown as ``***`` wherever kimitui prints or saves it.

The names come from a real SGLang 0.5.18 ``/server_info`` (``/work/shared/data/sglang-0.5.18-cpu``): the
keys after its last ``ServerArgs`` field, those only ``internal_states`` carries, and the simulator's own.
Pure functions over names; no I/O, no kimitui imports (sources and consumers both use it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

REDACTED = "***"

RUNTIME_STATE: frozenset[str] = frozenset({
    # appended to the ServerArgs fields by SGLang's /server_info
    "status", "max_total_num_tokens", "max_req_input_len", "startup_time", "internal_states", "version", "kv_events",
    # per DP rank, inside internal_states (and flattened by some readers)
    "last_gen_throughput", "memory_usage", "effective_max_running_requests_per_dp", "avg_spec_accept_length",
    "grpc_worker_threads",
    # older servers and the simulator
    "pid", "uptime", "sim", "sim_profile", "sim_seed",
})
"""What ``/server_info`` reports that no operator launched: never a knob.  (``sim_time_scale`` and
``sim_fault`` are the simulator's launch settings: a different clock is a confound worth naming.)"""

NOT_SECRETS: frozenset[str] = frozenset({"bucket_time_to_first_token", "kt_max_deferred_experts_per_token"})
"""SGLang launch args whose last word is ``token`` but that count tokens (checked against the real
server's 479 keys: its secrets are ``api_key``, ``admin_api_key`` and ``ssl_keyfile_password``)."""


def _name(name: str) -> str:
    return name.lower().removeprefix("env.").removeprefix("--").replace("-", "_")


def is_secret(name: str) -> bool:
    """Does the name say it holds a secret (``api_key``, ``HF_TOKEN``, ``env.PGPASSWORD``, ``--api-key``)?

    The last word decides for key and token (``ssl_keyfile`` is a path, ``max_total_tokens`` a count);
    secret and password anywhere."""
    low = _name(name)
    if low in NOT_SECRETS:
        return False
    words = [w for w in re.split(r"[^a-z0-9]+", low) if w]
    if not words:
        return False
    if any("secret" in w or "password" in w or "passwd" in w for w in words):
        return True
    return words[-1].endswith(("key", "token"))


def is_env(name: str) -> bool:
    """A profile's ``[env]`` variable, as diffs name it (``env.HF_TOKEN``)."""
    return name.startswith("env.")


def is_runtime_state(name: str) -> bool:
    """Reported by the server about itself, never launched: ``status``, ``memory_usage``, ``_private``."""
    return name in RUNTIME_STATE or name.startswith("_")


def is_knob(name: str) -> bool:
    """A launch setting a diff may count: neither runtime state nor a secret."""
    return not is_runtime_state(name) and not is_secret(name)


def plannable(name: str) -> bool:
    """May the autopilot try a change of it?  Never an ``[env]`` variable (it may hold a secret) nor a secret."""
    return is_knob(name) and not is_env(name)


def redact(name: str, value: Any) -> Any:
    """``***`` for a secret that is set; an unset one stays unset (None, ""), so a diff can say it was added."""
    if is_secret(name) and value not in (None, ""):
        return REDACTED
    if isinstance(value, str) and name == "launch_command":
        return redact_command(value)
    if isinstance(value, (list, tuple)) and name == "extra_args":
        return redact_argv([str(v) for v in value])
    if isinstance(value, Mapping) and name == "env":
        return redact_env(value)
    return value


def redact_env(env: Mapping[str, Any]) -> dict[str, Any]:
    """A profile's ``[env]`` as shown: ``HF_TOKEN = ***``, ``NCCL_P2P_DISABLE = 1``."""
    return {k: REDACTED if is_secret(k) and v not in (None, "") else v for k, v in env.items()}


def redact_map(values: Mapping[str, Any]) -> dict[str, Any]:
    """The same mapping with every secret's value ``***`` (launch commands and extra args redacted inside)."""
    return {k: redact(k, v) for k, v in values.items()}


_FLAG = re.compile(r"(?P<flag>--[A-Za-z0-9][A-Za-z0-9_.-]*)(?P<sep>=|\s+)(?P<value>(?:'[^']*'|\"[^\"]*\"|\S)+)")


def redact_command(command: str) -> str:
    """``... --api-key sk-1 --tp 8`` -> ``... --api-key *** --tp 8`` (also ``--api-key=sk-1``)."""
    def one(m: re.Match[str]) -> str:
        if is_secret(m.group("flag")) and not m.group("value").startswith("--"):
            return f"{m.group('flag')}{m.group('sep')}{REDACTED}"
        return m.group(0)
    return _FLAG.sub(one, command)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """An argv with each secret flag's value ``***`` (``["--api-key", "***"]``, ``["--api-key=***"]``)."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next and not arg.startswith("--"):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        flag, sep, _value = arg.partition("=")
        if flag.startswith("--") and is_secret(flag):
            if sep:
                out.append(f"{flag}={REDACTED}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(arg)
    return out


_VALUE = r"""(?P<value>(?!--)(?:'(?:[^'\\\n]|\\.)*(?:'|$)|"(?:[^"\\\n]|\\.)*(?:"|$)|[^\s,;&)'"]+))"""
"""A quoted value (to its closing quote, or the line's end: a truncated line keeps no secret's head) or a word."""
_ASSIGNED = re.compile(
    r"(?:key|Key|KEY|token|Token|TOKEN|(?:secret|Secret|SECRET|passw|Passw|PASSW)[\w.-]*)\s*=\s*" + _VALUE)
"""``name='value'`` / ``name=value`` (a ``ServerArgs(...)`` dump, ``key=value`` pairs, ``--flag=value``) whose
name ends in key or token or says secret or password: the match starts at that word (a literal, so the
engine skips to it) and the callback reads the name's start back from there."""
_FLAGGED = re.compile(
    r"--(?P<flag>(?=[\w.-]*?(?:key|token|secret|passw))[A-Za-z0-9][\w.-]*)(?P<sep>=|\s+|['\"],\s*['\"])" + _VALUE)
"""``--flag value`` / ``--flag=value`` / ``'--flag', 'value'`` (a logged command line or argv)."""
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_UNSET = frozenset({"None", "''", '""'})


def _hidden(value: str) -> str:
    quote = value[0] if value[0] in "'\"" and len(value) > 1 and value[-1] == value[0] else ""
    return f"{quote}{REDACTED}{quote}"


def redact_line(text: str) -> str:
    """A log line with the value of every secret-named setting ``***``: ``api_key='sk-1'`` -> ``api_key='***'``,
    ``--api-key sk-1`` -> ``--api-key ***``; an unset one (``api_key=None``) stays as it is.  Linear: each
    match is one name and one value.  Callers gate it on cheap substring checks (a line naming no key,
    token, secret or password never needs it)."""
    def assigned(m: re.Match[str]) -> str:
        start = m.start()
        while start > 0 and text[start - 1] in _NAME_CHARS:
            start -= 1
        value = m.group("value")
        if value in _UNSET or not is_secret(text[start : m.end()].partition("=")[0].strip()):
            return m.group(0)
        return m.group(0)[: m.start("value") - m.start()] + _hidden(value)

    def flagged(m: re.Match[str]) -> str:
        value = m.group("value")
        if value in _UNSET or not is_secret(m.group("flag")):
            return m.group(0)
        return m.group(0)[: m.start("value") - m.start()] + _hidden(value)

    out = _sub_at_hints(_ASSIGNED, assigned, text)
    return _FLAGGED.sub(flagged, out) if "--" in out else out


_ASSIGNED_STARTS = ("key", "Key", "KEY", "token", "Token", "TOKEN", "secret", "Secret", "SECRET",
                    "passw", "Passw", "PASSW")
"""The literals an ``_ASSIGNED`` match starts with: found by ``str.find``, the regex tried only there."""


def _sub_at_hints(pattern: re.Pattern[str], repl: Callable[[re.Match[str]], str], text: str) -> str:
    """``pattern.sub(repl, text)`` for a pattern whose every match starts with one of ``_ASSIGNED_STARTS``: the
    same leftmost, non-overlapping matches, but the regex runs only where a literal is (issue 33: the engine tried
    its alternation at every character of a 20k-character ``ServerArgs`` dump, 0.45 ms; its ~40 hints, 0.05 ms)."""
    starts: list[int] = []
    for word in _ASSIGNED_STARTS:
        at = text.find(word)
        while at >= 0:
            starts.append(at)
            at = text.find(word, at + 1)
    if not starts:
        return text
    pieces: list[str] = []
    done = 0
    for at in sorted(starts):
        if at < done:
            continue  # inside the previous match
        m = pattern.match(text, at)
        if m is None:
            continue
        pieces += [text[done:at], repl(m)]
        done = m.end()
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)
