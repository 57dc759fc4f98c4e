"""The user's config file: which hosts exist, key remaps, UI settings.

Where: ``--config PATH``, else ``$KIMITUI_CONFIG``, else
``platformdirs.user_config_dir("kimitui")/config.toml``.  No file at the
default place is fine (an empty config: kimitui runs on the simulated host
``sim``); a file that was asked for explicitly must exist.

Example::

    default_host = "gpu1"

    [hosts.gpu1]
    address = "gpu-host.example"      # or an alias from ~/.ssh/config
    user = "ops"
    key = "~/.ssh/id_ed25519"         # else ssh-agent / your usual keys
    jump = "bastion"                  # another [hosts.*] name, or "user@host:port"

    [hosts.bastion]
    address = "bastion.example"

    [keys]
    sweep = "w"

    [ui]
    gpu_refresh_hz = 2

    [sim]
    port = 30011                      # the simulated host's profiles serve here (default: each profile's port)

    [profiles]
    order = ["ep8-tuned", "ep8-eplb"]  # key 1, key 2 (a profile's own key = "N" wins)

    [fleet]
    hosts = ["gpu1", "gpu2"]          # one cockpit session over several hosts (docs/fleet.md)

    [otlp]
    endpoint = "http://127.0.0.1:4318"  # finished sweeps as OpenTelemetry traces (docs/prometheus.md)

    [metrics]
    port = 9470                       # serve kimitui's figures for Prometheus (docs/prometheus.md)

    [cost]
    gpu_hour = 2.10                   # currency per GPU-hour: cost per million tokens per level (docs/sweeps.md)
    kwh = 0.18                        # currency per kWh of the GPUs' own draw
    currency = "USD"                  # a label only

Every mistake is a :class:`ConfigError` whose message starts with
``FILE:LINE:`` and names the field, e.g.
``config.toml:7: hosts.gpu1.port: Input should be less than or equal to 65535``.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

if TYPE_CHECKING:
    from kimitui.analysis.cost import CostRates

ENV_VAR = "KIMITUI_CONFIG"
SIM_HOST = "sim"
LOCAL_HOST = "local"
"""This machine itself (real NVML, local processes): for a cockpit run on the GPU host."""
_HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_JUMP_SPEC = re.compile(r"^(?:[^@\s]+@)?[^@\s:]+(?::\d+)?$")


class ConfigError(ValueError):
    """The config file is missing, unreadable or invalid; the message names file, line and field."""


class HostConfig(BaseModel):
    """``[hosts.NAME]``: how to reach one GPU host."""

    model_config = ConfigDict(extra="forbid")

    address: str | None = None
    """Host name, IP, or a ``Host`` alias from ~/.ssh/config.  Not needed with ``sim = true``."""
    user: str | None = None
    """Default: ~/.ssh/config, else your local user name."""
    port: int | None = Field(default=None, ge=1, le=65535)
    """Default: ~/.ssh/config, else 22."""
    key: str | None = None
    """Private key file; without it ssh-agent and the usual ~/.ssh keys are tried."""
    agent: bool = True
    """Use ssh-agent (``$SSH_AUTH_SOCK``) for authentication."""
    known_hosts: str | None = None
    """known_hosts file to verify the host key against (default ~/.ssh/known_hosts)."""
    trust_on_first_use: bool = False
    """Accept and record an unknown host key on first connect (kimitui's own known_hosts)."""
    jump: str | None = None
    """Jump host: another ``[hosts.*]`` name, or ``user@host:port``."""
    keepalive_s: float = Field(default=1.0, gt=0, le=300)
    """Keepalive interval; a dead link is noticed after three unanswered ones (~4 s at 1 s)."""
    connect_timeout_s: float = Field(default=10.0, gt=0, le=600)
    python: str = "python3"
    """The remote Python that runs the GPU agent."""
    sim: bool = False
    """A simulated host: runs the simulator instead of SGLang (local unless ``address`` is set)."""
    sim_port: int | None = Field(default=None, ge=1, le=65535)
    """A simulated host's profiles serve on this port (several simulated hosts on one machine need
    one each; ``[sim] port`` is the embedded host's)."""

    @field_validator("key", "known_hosts")
    @classmethod
    def _expand(cls, value: str | None) -> str | None:
        return None if value is None else os.path.expanduser(value)

    @model_validator(mode="after")
    def _needs_address(self) -> "HostConfig":
        if not self.sim and not self.address:
            raise ValueError("`address` is required (or set `sim = true` for a simulated host)")
        if self.sim_port is not None and not self.sim:
            raise ValueError("`sim_port` applies to a simulated host only (`sim = true`)")
        return self


class ProfilesConfig(BaseModel):
    """``[profiles]``: which cockpit key each profile sits on (``order[0]`` is key 1, ...)."""

    model_config = ConfigDict(extra="forbid")

    order: list[str] = Field(default_factory=list, max_length=9)
    """Profile names by key; a profile's own ``key = "N"`` wins over this (docs/keys.md)."""

    @field_validator("order")
    @classmethod
    def _unique(cls, order: list[str]) -> list[str]:
        for name in order:
            if not _HOST_NAME.match(name):
                raise ValueError(f"{name!r} is not a profile name")
        dupes = sorted({n for n in order if order.count(n) > 1})
        if dupes:
            raise ValueError(f"{', '.join(dupes)} listed more than once (one key per profile)")
        return order


class SimConfig(BaseModel):
    """``[sim]``: settings of the embedded simulated host."""

    model_config = ConfigDict(extra="forbid")

    port: int | None = Field(default=None, ge=1, le=65535)
    """Every profile started on the simulated host serves on this port instead of its own
    (for when another process holds the profiles' port; ``kimitui --sim-port N`` for one run)."""


class FleetConfig(BaseModel):
    """``[fleet]``: the hosts one cockpit session shows together (``kimitui --host a --host b`` for one run)."""

    model_config = ConfigDict(extra="forbid")

    hosts: list[str] = Field(default_factory=list, max_length=64)
    """Host names (``[hosts.*]`` tables, or ``sim``); the first is focused when the cockpit opens."""

    @field_validator("hosts")
    @classmethod
    def _unique(cls, hosts: list[str]) -> list[str]:
        dupes = sorted({h for h in hosts if hosts.count(h) > 1})
        if dupes:
            raise ValueError(f"{', '.join(dupes)} listed more than once")
        return hosts


class MetricsConfig(BaseModel):
    """``[metrics]``: where ``kimitui run`` serves its figures for Prometheus (``--metrics-port`` wins)."""

    model_config = ConfigDict(extra="forbid")

    port: int | None = Field(default=None, ge=1, le=65535)
    """None: no endpoint."""
    addr: str = "127.0.0.1"
    """This machine only by default; an operator may name another address (``0.0.0.0``: every interface)."""

    @field_validator("addr")
    @classmethod
    def _an_address(cls, addr: str) -> str:
        if not _HOST_NAME.match(addr) and not re.fullmatch(r"[0-9A-Fa-f:.]+", addr):
            raise ValueError(f"{addr!r} is not an address to listen on")
        return addr


class OtlpConfig(BaseModel):
    """``[otlp]``: finished sweeps as traces to an OpenTelemetry collector (``--otlp-endpoint`` wins)."""

    model_config = ConfigDict(extra="forbid")

    endpoint: str | None = None
    """The collector's OTLP/HTTP address, e.g. ``http://127.0.0.1:4318`` (``/v1/traces`` is added); None: off."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Sent with every export (an API key a hosted backend asks for)."""

    @field_validator("endpoint")
    @classmethod
    def _an_url(cls, endpoint: str | None) -> str | None:
        if endpoint is not None and not re.match(r"^https?://[^\s/]+", endpoint):
            raise ValueError(f"{endpoint!r} is not an http(s) URL (e.g. http://127.0.0.1:4318)")
        return endpoint


DEFAULT_SLO = "ttft_p99<=2s,decode_p50>=20"
"""The story's SLO (docs/capacity.md): what the cockpit's capacity answer is judged on unless the config says."""


class CapacityConfig(BaseModel):
    """``[capacity]``: the SLO the cockpit judges each sweep's capacity on (``kimitui capacity``'s grammar)."""

    model_config = ConfigDict(extra="forbid")

    slo: str = DEFAULT_SLO

    @field_validator("slo")
    @classmethod
    def _parses(cls, slo: str) -> str:
        from kimitui.capacity.slo import parse_slo  # the grammar's own message names the bad term

        parse_slo(slo)
        return slo


class CostConfig(BaseModel):
    """``[cost]``: prices for the cost per million output tokens of each level (:mod:`kimitui.analysis.cost`).

    Either or both; neither (the default): no cost is shown anywhere."""

    model_config = ConfigDict(extra="forbid")

    gpu_hour: float | None = Field(default=None, gt=0, lt=1e6)
    """Currency per GPU-hour (rent or amortisation), times the host's GPUs."""
    kwh: float | None = Field(default=None, gt=0, lt=1e6)
    """Currency per kWh of the GPUs' own measured draw."""
    currency: str = Field(default="", max_length=12)
    """A label printed beside the figures (``USD``, ``EUR``); no conversion."""

    @field_validator("currency")
    @classmethod
    def _a_label(cls, currency: str) -> str:
        if currency and not re.fullmatch(r"[A-Za-z$€£¥]{1,12}", currency):
            raise ValueError(f"{currency!r} is not a currency label (letters or a symbol, e.g. \"USD\")")
        return currency

    def rates(self) -> "CostRates | None":
        """The prices for :func:`kimitui.analysis.cost.level_cost`; None when none is configured."""
        from kimitui.analysis.cost import CostRates

        if self.gpu_hour is None and self.kwh is None:
            return None
        return CostRates(self.gpu_hour, self.kwh, self.currency)


class Config(BaseModel):
    """The whole file.  An empty Config means: run on the simulated host."""

    model_config = ConfigDict(extra="forbid")

    default_host: str | None = None
    hosts: dict[str, HostConfig] = Field(default_factory=dict)
    keys: dict[str, str] = Field(default_factory=dict)
    """action -> key, remapping the cockpit's bindings."""
    ui: dict[str, float | int | str | bool] = Field(default_factory=dict)
    """Small free-form UI settings (refresh rates...)."""
    sim: SimConfig = Field(default_factory=SimConfig)
    profiles: ProfilesConfig = Field(default_factory=ProfilesConfig)
    """``[profiles] order``: the cockpit's profile keys."""
    capacity: CapacityConfig = Field(default_factory=CapacityConfig)
    """``[capacity] slo``: the cockpit's capacity answer beside the curve."""
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    """``[metrics] port/addr``: ``kimitui run`` serves its figures for Prometheus."""
    fleet: FleetConfig = Field(default_factory=FleetConfig)
    """``[fleet] hosts``: several hosts in one cockpit session (docs/fleet.md)."""
    otlp: OtlpConfig = Field(default_factory=OtlpConfig)
    """``[otlp] endpoint``: finished sweeps as traces to an OpenTelemetry collector (docs/prometheus.md)."""
    cost: CostConfig = Field(default_factory=CostConfig)
    """``[cost] gpu_hour/kwh/currency``: cost per million output tokens per level (docs/sweeps.md)."""
    path: Path | None = Field(default=None, exclude=True)
    """The file this was read from (None: no file)."""

    @field_validator("hosts")
    @classmethod
    def _host_names(cls, hosts: dict[str, HostConfig]) -> dict[str, HostConfig]:
        for name in hosts:
            if not _HOST_NAME.match(name):
                raise _LocatedError(("hosts", name), f"host name {name!r} must be letters, digits, '.', '_' or '-'")
        return hosts

    @model_validator(mode="after")
    def _references(self) -> "Config":
        if self.default_host and self.default_host not in self.hosts and self.default_host != SIM_HOST:
            raise _LocatedError(("default_host",), f"no [hosts.{self.default_host}] table (configured: {self._names()})")
        for i, name in enumerate(self.fleet.hosts):
            if name not in self.hosts and name != SIM_HOST:
                raise _LocatedError(("fleet", "hosts"), f"fleet.hosts[{i}]: no [hosts.{name}] table "
                                                        f"(configured: {self._names()})")
        for name, host in self.hosts.items():
            jump = host.jump
            if jump is None or jump in self.hosts:
                if jump == name:
                    raise _LocatedError(("hosts", name, "jump"), "a host cannot be its own jump host")
                continue
            if not _JUMP_SPEC.match(jump) or ("@" not in jump and ":" not in jump and "." not in jump):
                raise _LocatedError(
                    ("hosts", name, "jump"),
                    f"{jump!r} is neither a configured host ({self._names()}) nor user@host:port",
                )
        return self

    def _names(self) -> str:
        return ", ".join(self.hosts) or "none"

    def host_names(self) -> list[str]:
        return list(self.hosts)

    def sim_port(self, host: str, flag: int | None = None) -> int | None:
        """Where the simulated host ``host`` serves its profiles: ``--sim-port``, else its
        ``[hosts.H] sim_port``, else ``[sim] port`` (None: each profile's own port).

        The one rule, shared by the cockpit and ``kimitui swap``, so both start a host's server
        on the same port."""
        entry = self.hosts.get(host)
        return flag or (entry.sim_port if entry else None) or self.sim.port


class _LocatedError(ValueError):
    """A cross-field error that knows which key it is about."""

    def __init__(self, loc: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message


# --------------------------------------------------------------------------- where


def default_config_path() -> Path:
    return Path(platformdirs.user_config_dir("kimitui")) / "config.toml"


def config_path(path: str | Path | None = None) -> tuple[Path, bool]:
    """The file to read and whether it was asked for explicitly (flag or env)."""
    if path:
        return Path(path).expanduser(), True
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser(), True
    return default_config_path(), False


# --------------------------------------------------------------------------- reading


def load_config(path: str | Path | None = None) -> Config:
    """Read and validate the config (see the module docstring for where it is)."""
    file, explicit = config_path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"{file}: config file not found") from None
        return Config()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read config: {exc}") from None
    return parse_config(text, file)


def parse_config(text: str, file: str | Path = "<config>") -> Config:
    """Validate TOML text; errors name ``file:line`` and the field."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        where = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        reason = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", msg)
        if where:
            raise ConfigError(f"{file}:{where[1]}:{where[2]}: invalid TOML: {reason}") from None
        if "end of document" in msg:
            raise ConfigError(f"{file}:{max(1, len(text.splitlines()))}: invalid TOML: {reason}") from None
        raise ConfigError(f"{file}: invalid TOML: {reason}") from None
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, text, file)) from None
    except _LocatedError as exc:  # raised by a validator of the whole file
        raise ConfigError(_at(file, text, exc.loc, exc.message)) from None
    return config.model_copy(update={"path": Path(file)})


def _describe(exc: ValidationError, text: str, file: str | Path) -> str:
    lines = []
    for err in exc.errors():
        loc = tuple(str(p) for p in err["loc"])
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, _LocatedError):
            loc, message = cause.loc, cause.message
        else:
            message = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                message = f"unknown field `{loc[-1]}`"
            elif err["type"] == "missing":
                message = f"`{loc[-1]}` is required"
        lines.append(_at(file, text, loc, message))
    return "\n".join(lines)


def _at(file: str | Path, text: str, loc: tuple[str, ...], message: str) -> str:
    line = find_key_line(text, loc)
    where = f"{file}:{line}" if line else str(file)
    field = ".".join(loc) or "(top level)"
    return f"{where}: {field}: {message}"


# --------------------------------------------------------------------------- locating keys

_KEY_PART = r'(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|\'[^\']*\')'
_DOTTED = rf"{_KEY_PART}(?:\s*\.\s*{_KEY_PART})*"
_HEADER = re.compile(rf"^\s*\[\[?\s*({_DOTTED})\s*\]\]?\s*(?:#.*)?$")
_ASSIGN = re.compile(rf"^\s*({_DOTTED})\s*=")


def _split_key(dotted: str) -> tuple[str, ...]:
    parts = re.findall(_KEY_PART, dotted)
    return tuple(p[1:-1] if p[:1] in "\"'" else p for p in parts)


def find_key_line(text: str, loc: tuple[str, ...]) -> int | None:
    """The 1-based line that defines ``loc`` (or the closest enclosing table/key)."""
    best: tuple[int, int] | None = None  # (matched depth, line)
    table: tuple[str, ...] = ()
    in_multiline = False
    for number, raw in enumerate(text.splitlines(), start=1):
        if raw.count('"""') % 2 == 1 or raw.count("'''") % 2 == 1:
            in_multiline = not in_multiline
            if not in_multiline:
                continue
        elif in_multiline:
            continue
        header = _HEADER.match(raw)
        if header:
            table = _split_key(header[1])
            path = table
        else:
            assign = _ASSIGN.match(raw)
            if not assign:
                continue
            path = table + _split_key(assign[1])
        depth = 0
        while depth < min(len(path), len(loc)) and path[depth] == loc[depth]:
            depth += 1
        if depth == len(path) and (best is None or depth > best[0]):
            best = (depth, number)
            if depth == len(loc):
                return number
    return best[1] if best and best[0] > 0 else None
