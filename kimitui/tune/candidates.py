"""What a tune tries: one change at a time, each a knob (or one knob family) the operator can name.

By default: every existing profile that changes exactly one knob family from the start (``ep8-eplb``,
``ep4``, ``ep8-dense-tp1``, ``ep8-dflash``), plus the field notes' next experiments where no profile
makes them yet (EPLB on, EP4, ``--moe-dense-tp-size 1``, a DFlash drafter when a draft model is
known).  A change that lint says does nothing in this SGLang (``num_continuous_decode_steps``), one
that changes several families at once (``ep8-v2``: the notes' confound) and one that returns a knob
to its default (a profile file cannot unset what it extends) are skipped, each with its reason.

Never planned: an ``[env]`` variable or a setting whose name says key, token, secret or password
(:func:`kimitui.knobs.plannable`): a profile that differs only by ``HF_TOKEN`` is no candidate, and no value of
such a setting is ever printed or saved in the tune's state or report (a skip names the setting, not its value).
"""

from __future__ import annotations

from typing import Any

from kimitui.knobs import is_env, is_secret, plannable
from kimitui.profiles import Profile, diff_profiles, lint_profile
from kimitui.profiles.diff import knob_family, show_value
from kimitui.tune.state import Candidate

SEED_EXPERIMENTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("EPLB on", {"enable_eplb": True}),
    ("EP4", {"ep_size": 4}),
    ("dense MLP TP1", {"moe_dense_tp_size": 1}),
)
"""The notes' follow-ups, in the order they went (the drafter comes last, when a draft model is known)."""
SEED_ORDER = ("enable_eplb", "ep_size", "moe_dense_tp_size", "speculative decoding")


def parse_change(text: str) -> Candidate:
    """``--change knob=value``: one knob (TOML-ish value: true/false, a number, else a string)."""
    knob, sep, raw = text.partition("=")
    knob = knob.strip().replace("-", "_")
    if knob and not plannable(knob):
        raise ValueError(f"--change {knob}=...: {_unplannable(knob)}")
    if not sep or not knob or not raw.strip():
        raise ValueError(f"--change {text!r}: write knob=value, e.g. enable_eplb=true or ep_size=4")
    value: Any = raw.strip()
    low = value.lower()
    if low in ("true", "false"):
        value = low == "true"
    else:
        for kind in (int, float):
            try:
                value = kind(value)
                break
            except ValueError:
                continue
    return Candidate(label=f"{knob} {show_value(value)}", family=knob_family(knob), settings={knob: value},
                     source="--change")


def from_profile(start: Profile, other: Profile) -> tuple[Candidate | None, str | None]:
    """(the candidate ``other`` makes against ``start``, None) or (None, why it is not one step)."""
    d = diff_profiles(start, other)
    families = d.families
    if not families:  # the same knobs (or only observability): nothing to measure
        return None, (f"{other.name}: differs only by {', '.join(d.secrets)}, a secret: not a knob"
                      if d.secrets else None)
    unplannable = [k for knobs in families.values() for k in knobs if not plannable(k)]
    if unplannable:
        return None, f"{other.name}: changes {', '.join(unplannable)}: {_unplannable(unplannable[0])}"
    if len(families) > 1:
        return None, (f"{other.name}: changes {len(families)} knob families at once ({', '.join(d.family_names())}): "
                      "not one step")
    unset = [k for k, (_, new) in d.changes.items() if new is None]
    if unset:
        return None, f"{other.name}: returns {', '.join(unset)} to the default, which a variant file cannot do"
    (family, knobs), = families.items()
    # the family plus what it reports (observability); never an [env] value or a secret
    settings = {k: new for k, (_, new) in d.changes.items() if plannable(k)}
    label = _label(family, {k: settings[k] for k in knobs})
    return Candidate(label=label, family=family, settings=settings, source=f"profile {other.name}"), None


def _unplannable(knob: str) -> str:
    if is_secret(knob):
        return "its name says it holds a secret (key, token, secret, password): never a knob the autopilot tries"
    if is_env(knob):
        return "an [env] variable may hold a secret: the autopilot never plans one (try it by hand: kimitui swap)"
    return "not a launch setting (the server reports it about itself): never a knob"


def _label(family: str, knobs: dict[str, Any]) -> str:
    algo = knobs.get("speculative_algorithm")
    if algo is not None:
        return f"{algo} drafter"
    return ", ".join(f"{k} {show_value(v)}" for k, v in knobs.items())


def default_candidates(start: Profile, profiles: list[Profile], *,
                       draft_model: str | None = None) -> tuple[list[Candidate], list[str]]:
    """(candidates in the order the notes went, then the rest by name; what was skipped and why)."""
    found: list[Candidate] = []
    skipped: list[str] = []
    for p in sorted(profiles, key=lambda p: p.name):
        if p.name == start.name:
            continue
        cand, why = from_profile(start, p)
        if cand is not None:
            found.append(cand)
        elif why:
            skipped.append(why)
    for label, settings in SEED_EXPERIMENTS:
        if any(c.family == knob_family(next(iter(settings))) for c in found):
            continue
        if all(getattr(start, k, None) == v for k, v in settings.items()):
            continue
        found.append(Candidate(label=_label(label, settings), family=knob_family(next(iter(settings))),
                               settings=settings, source="the field notes' next experiment"))
    if start.speculative_algorithm == "DFLASH":  # the drafter is already on: no step adds it
        pass
    elif draft_model and not any(c.settings.get("speculative_algorithm") == "DFLASH" for c in found):
        found.append(Candidate(label="DFLASH drafter", family="speculative decoding", source="--draft-model",
                               settings={"speculative_algorithm": "DFLASH",
                                         "speculative_draft_model_path": draft_model,
                                         "speculative_dflash_block_size": 16}))
    elif not any(c.settings.get("speculative_algorithm") == "DFLASH" for c in found):
        skipped.append("DFLASH drafter: no draft model known (a profile with one, or --draft-model PATH)")
    kept, no_effect = drop_no_effect(start, found)
    order = {f: i for i, f in enumerate(SEED_ORDER)}
    kept.sort(key=lambda c: (order.get(c.family, len(order)), c.source))
    return _one_per_value(kept), skipped + no_effect


def drop_no_effect(start: Profile, cands: list[Candidate]) -> tuple[list[Candidate], list[str]]:
    """Candidates lint passes; the others with lint's words (no effect in this SGLang, or invalid)."""
    kept: list[Candidate] = []
    skipped: list[str] = []
    for c in cands:
        try:
            variant = apply(start, c)
        except ValueError as exc:
            skipped.append(f"{c.label}: {exc}")
            continue
        issues = [i for i in lint_profile(variant) if i.field in c.settings]
        errors = [i for i in issues if i.severity == "error"]
        idle = [i for i in issues if "no effect" in i.message]
        if errors:
            skipped.append(f"{c.label}: invalid ({errors[0].field}: {errors[0].message})")
        elif idle:
            skipped.append(f"{c.label} ({c.source}): {idle[0].field} {idle[0].message}")
        else:
            kept.append(c)
    return kept, skipped


def _one_per_value(cands: list[Candidate]) -> list[Candidate]:
    """Two profiles making the same change are one candidate (the first named)."""
    seen: set[str] = set()
    out: list[Candidate] = []
    for c in cands:
        key = repr(sorted(c.settings.items()))
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def apply(base: Profile, cand: Candidate) -> Profile:
    """``base`` with the candidate's knobs set (validated as a profile: a bad value raises ValueError)."""
    data = base.model_dump()
    env = dict(data.get("env") or {})
    for k, v in cand.settings.items():
        if k.startswith("env."):
            env[k[4:]] = v
        elif k not in data:
            raise ValueError(f"{k} is not a profile knob")
        else:
            data[k] = v
    data["env"] = env
    try:
        return Profile.model_validate(data)
    except Exception as exc:  # pydantic says which field
        raise ValueError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc
