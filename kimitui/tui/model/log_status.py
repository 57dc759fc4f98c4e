"""The log panel's one status line: filter, search, pause and the keys, in whatever width it gets.

At 80x24 the log is about 38 columns wide, so the line comes in three forms, the widest that fits:
words (``severity ≥ warning · polling hidden ...   [f severity  t kind ...]``), short words, and
signs (``≥warn -poll “reb…” PAUSED +12  f t / p``).  The search text is cut last, to what is left.
"""

from __future__ import annotations

from kimitui.tui.model.log_ring import HIDE_POLLING

_HINTS = ("   [f severity  t kind  / search  p pause]", "  f sev t kind / find p pause", "  f t / p")
_SEP = ("  ·  ", " · ", " ")
_FORMS = ((0, 0), (1, 1), (1, 2), (2, 2))
"""(words, hints) forms to try, widest first: the words shrink before the hints become letters alone."""
_SHORT = {"info": "info", "warning": "warn", "error": "err", "critical": "crit"}


def _severity(min_severity: str, form: int) -> str:
    if min_severity == "debug":
        return "all severities" if form == 0 else ""
    return (f"severity ≥ {min_severity}", f"≥ {min_severity}", f"≥{_SHORT.get(min_severity, min_severity)}")[form]


def _kind(kind: str | None, form: int) -> str:
    if kind == HIDE_POLLING:
        return ("polling hidden", "polling hidden", "-poll")[form]
    if kind is None:
        return ("all lines, polling too", "all lines", "all")[form]
    if kind.startswith("-"):
        return (f"{kind[1:]} hidden", f"{kind[1:]} hidden", kind)[form]
    return (f"only {kind}", f"only {kind}", f"={kind}")[form]


def _pause(paused: bool, waiting: int, form: int) -> str:
    if not paused:
        return ""
    return (f"PAUSED ({waiting} new)", f"PAUSED +{waiting}", f"PAUSED +{waiting}")[form]


def _quoted(search: str, room: int) -> str:
    """``“text”`` cut to ``room`` cells with an ellipsis; empty when not even one letter fits."""
    if len(search) + 2 <= room:
        return f"“{search}”"
    return f"“{search[:room - 3]}…”" if room >= 4 else ""


def status_text(width: int, *, min_severity: str, kind: str | None, search: str, paused: bool,
                waiting: int) -> str:
    """The widest form that fits ``width`` cells; the narrowest form cut to fit when none does."""
    line = ""
    for form, hint_form in _FORMS:
        head = [p for p in (_severity(min_severity, form), _kind(kind, form)) if p]
        tail = [p for p in (_pause(paused, waiting, form),) if p]
        sep, hints = _SEP[form], _HINTS[hint_form]
        parts = head + tail
        if search:
            label = "search " if form == 0 else ""
            room = width - len(sep.join(parts)) - len(sep) - len(hints) - len(label)
            quoted = _quoted(search, room if form == 2 else len(search) + 2)
            parts = head + ([label + quoted] if quoted else []) + tail
        line = sep.join(parts) + hints
        if len(line) <= width:
            return line
    return line[:max(0, width - 1)] + "…" if width > 0 else ""
