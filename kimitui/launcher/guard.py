"""The confound guard: never change two knobs at once without being told.

The field notes swapped to ``ep8-v2`` (continuous decode 8 -> 16 *and* EPLB on)
and could not tell which change hurt.  kimitui keeps a baseline per host — the
profile the operator marked known-good, by default the one running when the
session started — and before a swap (and on every sweep after it) compares the
profile against it.  When more than one knob differs it says so plainly and
offers single-knob variants: existing profiles that change exactly one of the
knobs, and new profile files (``extends`` the baseline, one knob set) written
on request.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from kimitui.events import Baseline, ErrorSeverity
from kimitui.paths import state_dir
from kimitui.profiles import Profile, ProfileError, diff_profiles, lint_profile, load_profile, scan_profiles, single_knob_alternatives
from kimitui.profiles.diff import ProfileDiff, knob_family, show_value
from kimitui.profiles.loader import user_dir

# --------------------------------------------------------------------------- the baseline store


def _store_path() -> Path:
    return state_dir() / "baselines.json"


def _read_store() -> dict[str, Any]:
    try:
        data = json.loads(_store_path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def mark_baseline(host: str, profile: Profile | str) -> Baseline:
    """Remember ``profile`` (a Profile or a name) as the known-good one on ``host``; returns the event."""
    name = profile.name if isinstance(profile, Profile) else profile
    source = profile.source_path if isinstance(profile, Profile) else None
    store = _read_store()
    store[host] = {"profile": name, "path": str(source) if source else None, "marked_at": time.time()}
    path = _store_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(store, indent=1, sort_keys=True))
    os.replace(tmp, path)
    return Baseline(host=host, profile=name)


def baseline_name(host: str, running: str | None = None) -> str | None:
    """The marked baseline of ``host``; else ``running`` (the profile running when the session started)."""
    entry = _read_store().get(host)
    if isinstance(entry, dict) and entry.get("profile"):
        return str(entry["profile"])
    return running


def load_baseline(host: str, running: str | None = None, extra_dirs: list[str] | None = None) -> Profile | None:
    """The baseline as a Profile (by its recorded path first, then by name); None if there is none."""
    entry = _read_store().get(host)
    candidates: list[str] = []
    if isinstance(entry, dict):
        candidates += [c for c in (entry.get("path"), entry.get("profile")) if c]
    elif running:
        candidates.append(running)
    for ref in candidates:
        try:
            return load_profile(ref, extra_dirs)
        except (ProfileError, OSError):
            continue
    return None


# --------------------------------------------------------------------------- the check

LISTEN_KNOBS = frozenset({"host", "port", "pd.ports"})
"""Where a server listens: kimitui moves every profile there on the simulated host (``--sim-port``), so a
difference in them is no news on a guard line (the swap's diff table still shows it)."""


@dataclass(frozen=True)
class Variant:
    """A single-knob (or single-family) alternative to a confounded change."""

    name: str
    knob: str
    value: Any
    existing: bool
    """True: a profile of that name already exists and makes exactly this one change."""
    path: str | None = None
    family: dict[str, Any] = field(default_factory=dict)
    """Every knob of a knob family this variant sets (a drafter: algorithm, draft model, ...); else empty."""
    no_effect: bool = False
    """Lint says its one change has no effect in this SGLang (``ep8-cont16``): measuring it teaches nothing."""

    def settings(self) -> dict[str, Any]:
        """What the variant file sets besides ``extends``: the family's knobs, or the one knob."""
        return dict(self.family) if self.family else {self.knob: self.value}


@dataclass
class GuardReport:
    """What differs from the baseline, and what to do about it."""

    baseline: str
    target: str
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    confounded: bool = False
    message: str = ""
    warnings: list[str] = field(default_factory=list)
    """Lint warnings of the target (e.g. a knob with no effect in this SGLang)."""
    variants: list[Variant] = field(default_factory=list)

    @property
    def offers(self) -> list[Variant]:
        """The variants worth measuring: not one whose only change lint says has no effect."""
        return [v for v in self.variants if not v.no_effect]

    @property
    def severity(self) -> ErrorSeverity:
        """A confounded change needs attention (``warning``); one knob, or none a sweep measures, is a fact (``info``)."""
        return "warning" if self.confounded else "info"

    def lines(self) -> list[str]:
        """The message, the per-knob changes and the warnings, for a terminal or a dialog."""
        out = [self.message]
        out += [f"  {k}: {show_value(a)} -> {show_value(b)}" for k, (a, b) in self.changes.items()]
        out += self.warnings
        if self.offers:
            out.append("single-knob alternatives: " + ", ".join(v.name for v in self.offers))
        return out


def lint_warnings(target: Profile, changed: Collection[str] | None) -> list[str]:
    """The target's lint warnings; one saying a knob has no effect only where ``changed`` holds that knob.

    ``changed``: the knobs the swap changes (None: all of them, nothing runs).  Said on every swap,
    "has no effect" reads as a problem with swaps that never touch the knob."""
    out = []
    for issue in lint_profile(target):
        if issue.severity == "error" or (issue.no_effect and changed is not None and issue.field not in changed):
            continue
        if issue.field == "num_continuous_decode_steps":
            out.append("num_continuous_decode_steps has no effect in this SGLang (parsed but never read since "
                       "PR #2095, 2024-11; deprecated: `kimitui profiles lint` says more)")
        else:
            out.append(f"{issue.field}: {issue.message}")
    return out


def _no_effect_only(profile: Profile, knobs: Collection[str]) -> bool:
    """Every one of ``knobs`` is one lint says ``profile`` sets to no effect."""
    idle = {i.field for i in lint_profile(profile) if i.no_effect}
    return bool(knobs) and all(k in idle for k in knobs)


def _slug(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "default"
    return re.sub(r"[^A-Za-z0-9.]+", "-", str(value)).strip("-") or "x"


_SHORT = {
    "num_continuous_decode_steps": "cont",
    "enable_eplb": "eplb",
    "max_running_requests": "maxreq",
    "mem_fraction_static": "mem",
    "moe_dense_tp_size": "dense-tp",
    "cuda_graph_max_bs": "graph-bs",
    "chunked_prefill_size": "chunk",
    "context_length": "ctx",
}


def variant_name(baseline: str, knob: str, value: object) -> str:
    """``ep8-tuned-eplb-on``, ``ep8-tuned-cont16``: the baseline plus the one knob."""
    short = _SHORT.get(knob, knob.replace("_", "-").replace(".", "-"))
    if isinstance(value, bool):
        return f"{baseline}-{short}-{_slug(value)}"
    return f"{baseline}-{short}{_slug(value)}" if short in _SHORT.values() else f"{baseline}-{short}-{_slug(value)}"


def check(baseline: Profile, target: Profile, *, candidates: list[Profile] | None = None,
          changed: Collection[str] | None = None) -> GuardReport:
    """Compare ``target`` with ``baseline`` (Profiles); offer single-knob variants when confounded.

    ``candidates``: profiles to look through for existing single-knob alternatives
    (default: every profile on the search path).  ``changed``: the knobs the swap changes from what
    runs, where a no-effect warning is said (default: those that differ from the baseline).
    """
    diff = diff_profiles(baseline, target)
    report = GuardReport(baseline=baseline.name, target=target.name, changes=dict(diff.changes))
    report.confounded = diff.confounded
    report.warnings = lint_warnings(target, diff.changes if changed is None else changed)
    report.message = _guard_message(diff, baseline.name, target.name)
    if diff.confounded:
        report.variants = _variants(diff, baseline, target, candidates)
        report.message += ": " + ", ".join(v.name for v in report.offers) if report.offers else ""
    return report


def _guard_message(diff: ProfileDiff, baseline: str, target: str) -> str:
    """The guard's sentence: no change, one knob (or one family), or confounded."""
    fams = diff.families
    # where it listens is left out: ``--sim-port`` (or a host's own port) moves every profile there
    reports = [k for k in diff.observability if k not in LISTEN_KNOBS]
    tail = f" (and only what it reports: {', '.join(reports)})" if reports else ""
    if not diff.changes:
        return f"{target}: no knob differs from the baseline {baseline}"
    if not fams:
        back = " (it is the baseline)" if target == baseline else ""
        return f"{target}: no knob a sweep measures differs from the baseline {baseline}{back}{tail}"
    if len(fams) == 1:
        (name, knobs), = fams.items()
        if knobs == [name]:
            line = next(ln for ln in diff.lines() if ln.startswith(f"{name}: "))
            return f"{target}: one knob changed from the baseline {baseline}: {line}{tail}"
        return f"{target}: one knob family changed from the baseline {baseline}: {diff.family_names()[0]}{tail}"
    simple = all(knobs == [name] for name, knobs in fams.items())
    what, sep = ("knobs", ", ") if simple else ("knob families", "; ")
    return (
        f"confounded: {len(fams)} {what} changed from the baseline {baseline} ({sep.join(diff.family_names())}) — "
        f"a result cannot be attributed to any one of them; try one knob at a time"
    )


def _variants(diff: ProfileDiff, baseline: Profile, target: Profile, candidates: list[Profile] | None) -> list[Variant]:
    """Per family changed: an existing profile that makes just that change, else a variant file to write.

    A family is one variant (the whole drafter, never its algorithm alone).  Nothing is offered for a
    change a file extending the baseline cannot make: back to a default (TOML has no null), an env
    variable or extra_args.
    """
    if candidates is None:
        try:
            candidates, _broken = scan_profiles()  # a broken profile elsewhere hides no suggestion
        except Exception:  # noqa: BLE001 - the warning stands even if profiles cannot be listed
            candidates = []
    existing: dict[str, Profile] = {}
    for p in single_knob_alternatives(baseline, target, candidates):
        for family in diff_profiles(baseline, p).families:
            existing.setdefault(family, p)
    variants: list[Variant] = []
    for family, knobs in diff.families.items():
        values = {k: diff.changes[k][1] for k in knobs}
        knob, new = knobs[0], values[knobs[0]]
        several = values if len(knobs) > 1 else {}
        if family in existing:
            p = existing[family]
            src = str(p.source_path) if p.source_path else None
            variants.append(Variant(p.name, knob, new, True, src, several, _no_effect_only(p, knobs)))
        elif all(v is not None and not k.startswith("env.") and k != "extra_args" for k, v in values.items()):
            name = variant_name(baseline.name, knob, new) if not several else _family_variant_name(baseline.name, values)
            variants.append(Variant(name, knob, new, False, family=several, no_effect=_no_effect_only(target, knobs)))
    return variants


def _family_variant_name(baseline: str, values: dict[str, Any]) -> str:
    """``ep8-eplb-dflash``: the baseline plus the family's defining value (a drafter's algorithm)."""
    algo = values.get("speculative_algorithm")
    return f"{baseline}-{_slug(algo).lower()}" if algo is not None else f"{baseline}-{_slug(next(iter(values.values())))}"


def write_variants(report: GuardReport, out_dir: str | Path | None = None) -> list[Path]:
    """Write each not-yet-existing variant as ``NAME.toml`` that ``extends`` the baseline.

    Into ``out_dir`` or the user's profile dir.  An existing file is never overwritten.
    Returns the paths of the variant files (written now or already there).
    """
    target_dir = Path(out_dir) if out_dir is not None else user_dir()
    target_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for v in report.variants:
        if v.existing:
            continue
        path = target_dir / f"{v.name}.toml"
        if not path.exists():
            doc: dict[str, Any] = {
                "name": v.name,
                "description": (f"{report.baseline} with only {knob_family(v.knob)} changed ({', '.join(v.family)}; "
                                "single-family variant by kimitui)" if v.family else
                                f"{report.baseline} with only {v.knob} changed (single-knob variant by kimitui)"),
                "extends": report.baseline,
            }
            doc.update({k: val for k, val in v.settings().items() if val is not None})
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(tomli_w.dumps(doc))
            os.replace(tmp, path)
        paths.append(path)
    return paths


def sweep_notice(host: str, running: Profile, *, extra_dirs: list[str] | None = None) -> GuardReport | None:
    """For a sweep about to start on ``running``: the guard report vs the host's baseline, or None.

    None when there is no baseline or the running profile is the baseline itself.
    """
    base = load_baseline(host, None, extra_dirs)
    if base is None or base.name == running.name:
        return None
    return check(base, running)
