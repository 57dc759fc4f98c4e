"""Which launch knobs differ between two profiles, and whether the change is confounded.

Changing two knobs at once (the seeds' ``ep8-v2``) makes a result impossible to
attribute; the diff says so plainly.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kimitui.knobs import is_knob, redact, redact_argv, redact_env
from kimitui.profiles.schema import Profile


OBSERVABILITY_KNOBS: frozenset[str] = frozenset({
    "host", "port", "pd.ports",
    "enable_metrics", "enable_metrics_for_all_schedulers", "expert_balancedness_report_mode",
    "tokenizer_metrics_custom_labels_header", "tokenizer_metrics_allowed_custom_labels", "enable_mfu_metrics",
    "decode_log_interval", "log_level", "env.SGLANG_EPLB_HEATMAP_COLLECTION_INTERVAL",
    "env.SGLANG_LOG_EXPERT_LOCATION_METADATA",
})
"""Knobs that only change what the server reports (metrics, log lines, labels) or where it listens
(``host``, ``port``, a PD deployment's ``pd.ports``: ``kimitui --sim-port`` moves every profile), never
what a sweep measures: a diff shows them, but they never make a change confounded."""

SPECULATIVE_FAMILY = "speculative decoding"


def knob_family(knob: str) -> str:
    """The family a knob belongs to: one speculative-decoding setup is one change, whatever its knobs.

    A drafter is chosen as a whole (algorithm, draft model, block size or steps/topk/draft tokens):
    changing DFLASH's block size with it is one experiment, not a confound.  Every other knob is
    its own family.
    """
    if knob.startswith("speculative_"):
        return SPECULATIVE_FAMILY
    return knob


@dataclass(frozen=True)
class ProfileDiff:
    """Knob -> (value in a, value in b), for the knobs that differ, in field order."""

    a: str
    b: str
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    @property
    def families(self) -> dict[str, list[str]]:
        """Family -> its changed knobs, for the changes a sweep can feel (observability and secrets left out:
        a profile that differs only by ``[env] HF_TOKEN`` changes no knob)."""
        out: dict[str, list[str]] = {}
        for knob in self.changes:
            if knob not in OBSERVABILITY_KNOBS and is_knob(knob):
                out.setdefault(knob_family(knob), []).append(knob)
        return out

    @property
    def observability(self) -> list[str]:
        """Changed knobs that only change what the server reports."""
        return [k for k in self.changes if k in OBSERVABILITY_KNOBS]

    @property
    def secrets(self) -> list[str]:
        """Changed settings that hold a secret (their values are ``***`` here): never a knob."""
        return [k for k in self.changes if not is_knob(k)]

    @property
    def confounded(self) -> bool:
        """More than one knob family differs: an effect cannot be attributed to one of them."""
        return len(self.families) > 1

    @property
    def knobs(self) -> list[str]:
        return list(self.changes)

    def lines(self) -> list[str]:
        """``num_continuous_decode_steps: 8 -> 16``, one line per changed knob."""
        return [f"{knob}: {show_value(old)} -> {show_value(new)}" for knob, (old, new) in self.changes.items()]

    def family_names(self) -> list[str]:
        """``speculative decoding (speculative_algorithm, ...)`` for a family of several, else the knob."""
        return [name if knobs == [name] else f"{name} ({', '.join(knobs)})" for name, knobs in self.families.items()]

    def summary(self) -> str | None:
        """``one knob family changed: speculative decoding (...)`` when one multi-knob family changed."""
        fams = self.families
        if len(fams) != 1:
            return None
        (name, knobs), = fams.items()
        if knobs == [name]:
            return None
        return f"one knob family changed: {self.family_names()[0]}"

    def warning(self) -> str | None:
        """``confounded: 2 knobs changed (enable_eplb, num_continuous_decode_steps)`` or None."""
        if not self.confounded:
            return None
        fams = self.families
        if all(knobs == [name] for name, knobs in fams.items()):
            return f"confounded: {len(fams)} knobs changed ({', '.join(sorted(fams))})"
        return f"confounded: {len(fams)} knob families changed ({'; '.join(self.family_names())})"

    def as_event_diff(self) -> dict[str, list[Any]]:
        """The shape ``ProfileSwitch.diff`` wants: knob -> [from, to]."""
        return {k: [old, new] for k, (old, new) in self.changes.items()}


def show_value(value: object) -> str:
    """A knob's value as the diff prints it: ``(default)`` for unset, TOML's true/false, a quoted odd string."""
    if value is None:
        return "(default)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value and value.strip() == value else repr(value)
    return str(value)


def redacted(profile: Profile) -> Profile:
    """The profile as shown (``kimitui profiles show``): secrets' values ``***`` (``[env] HF_TOKEN``, an
    ``--api-key`` in ``extra_args``).  For reading only: a server is launched from the profile itself."""
    return profile.model_copy(update={"env": redact_env(profile.env), "extra_args": redact_argv(profile.extra_args)})


def _flat_knobs(profile: Profile) -> dict[str, Any]:
    """``knobs()`` with ``env`` spread out as ``env.NAME`` (each variable is its own knob)."""
    knobs = profile.knobs()
    env = knobs.pop("env")
    knobs.update({f"env.{k}": v for k, v in sorted(env.items())})
    return knobs


def _pd_ports(pd: Any) -> list[int | None]:
    """Where a PD deployment's servers listen: each prefill's port and bootstrap port, each decode's port."""
    return [*(p for s in pd.prefill for p in (s.port, s.bootstrap_port)), *(s.port for s in pd.decode)]


def _pd_unplaced(pd: Any) -> Any:
    """The PD settings without where they listen (what a moved deployment keeps)."""
    def bare(servers: list[Any]) -> list[Any]:
        return [s.model_copy(update={"port": 0, "bootstrap_port": None}) for s in servers]
    return pd.model_copy(update={"prefill": bare(pd.prefill), "decode": bare(pd.decode)})


def _only_ports_moved(a: Any, b: Any) -> bool:
    return a is not None and b is not None and a != b and _pd_unplaced(a) == _pd_unplaced(b)


def diff_profiles(a: Profile, b: Profile) -> ProfileDiff:
    """The launch knobs (``Profile.knobs``) whose values differ from ``a`` to ``b``.

    Environment variables count one by one (``env.NCCL_P2P_DISABLE: (default) -> 1``).  A secret's value
    (``env.HF_TOKEN``, an ``--api-key`` in ``extra_args``) is ``***`` in the diff: it says that it changed, never to what.
    """
    ka, kb = _flat_knobs(a), _flat_knobs(b)
    if _only_ports_moved(ka.get("pd"), kb.get("pd")):  # a deployment moved whole (--sim-port): where it listens
        ka["pd"], kb["pd"] = None, None
        ka["pd.ports"], kb["pd.ports"] = _pd_ports(a.pd), _pd_ports(b.pd)
    keys = list(ka) + [k for k in kb if k not in ka]
    changes = {k: (redact(k, ka.get(k)), redact(k, kb.get(k))) for k in keys if ka.get(k) != kb.get(k)}
    return ProfileDiff(a=a.name, b=b.name, changes=changes)


def single_knob_alternatives(a: Profile, b: Profile, candidates: Iterable[Profile]) -> list[Profile]:
    """Candidates that make exactly one of the a -> b changes: one knob family, whole, with b's values.

    For a confounded swap (``ep8-tuned -> ep8-v2``) this offers ``ep8-eplb`` and ``ep8-cont16``.  A family
    is a unit: a candidate that sets DFLASH but not b's draft model or block size is another experiment,
    not half of this one.  Observability knobs are ignored on both sides: they change no figure.
    """
    wanted = diff_profiles(a, b)
    wanted_new = {k: new for k, (_old, new) in wanted.changes.items()}
    found = []
    for c in candidates:
        d = diff_profiles(a, c)
        fams = d.families
        if len(fams) != 1:
            continue
        ((family, knobs),) = fams.items()
        whole = wanted.families.get(family)
        if whole is not None and sorted(knobs) == sorted(whole) and all(
                d.changes[k][1] == wanted_new[k] for k in knobs):
            found.append(c)
    return found


def family_of_alternative(a: Profile, c: Profile) -> str:
    """What a single-family alternative changes, in words (``enable_eplb``, ``speculative decoding (...)``)."""
    names = diff_profiles(a, c).family_names()
    return names[0] if names else "nothing"
