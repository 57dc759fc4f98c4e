"""A straggler, read top-down: its cause and the evidence, the facts, its own timeline over the GPUs, the gap's
log, the GPU table.

Issue 18: the first line is the cause kimitui attributed (:mod:`kimitui.analysis.causes`), with its share
of the slow time and how sure it is, then one line of evidence per cause; "Unknown" when nothing it saw
overlaps the gap.  While the view is open it follows the cockpit's answer (a late log line may change it
for a few seconds after the level's result).

Issue 15: the old view listed the gap's 119 raw log lines, nearly all kimitui's own polling and each
SGLang line eight times, and the line that explained the gap needed scrolling.  Now the headline says
the facts (rate, gap, what the GPUs did, the log line that says why), the log hides polling and merges
ranks with the explaining lines marked, and ``a`` shows every line as it came for the curious.

Issue 29: the cause line and the facts line say what the GPUs did in the gap with one set of figures
(:mod:`kimitui.analysis.causes.gpu_figures`: each GPU's mean on the host's clock against the span before),
the facts line quoting the cause's words, and the GPU table's "before" and "mean" columns are those figures.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from kimitui.analysis.causes.attribute import Attribution
from kimitui.analysis.causes.words import evidence_lines
from kimitui.analysis.causes.words import headline as cause_headline
from kimitui.analysis.gap_evidence import (GapEvidence, ShownLine, display, fell_in_gap, fold_quiet, gap_lines,
                                           headline, hidden_polling, in_gap_gpus, in_gap_samples)
from kimitui.analysis.window import GpuWindowSummary
from kimitui.tui.render import clock, num, rate
from kimitui.tui.widgets.request_timeline import RequestTimeline, timeline_rows
from kimitui.tui.screens.dialog import Dialog

SEVERITY_STYLE = {"error": "bold red", "critical": "bold red", "warning": "yellow", "debug": "dim"}
QUIET_LINES = 8
"""Lines that explain nothing kept nearest the gap's start before the rest fold into '… N more'."""
RAW_LINES = 400
"""What ``a`` (every line as it came) lists at most: the gap's tail."""


def gpu_table(gpus: list[GpuWindowSummary], width: int = 120) -> Table:
    """One row per GPU in the gap; narrow screens drop the PCIe and power columns."""
    table = Table(box=None, header_style="bold", pad_edge=False, padding=(0, 1))
    wide = width >= 70
    cols = ["GPU", "util before", "min", "mean"] + (["PCIe peak"] if wide else []) + ["temp max"] \
        + (["power max"] if wide else []) + ["throttle"]
    for col in cols:
        table.add_column(col, justify="left" if col == "throttle" else "right")
    temps = [g for g in gpus if g.temp_max is not None]
    hot = max(temps, key=lambda g: g.temp_max or 0.0) if temps else None
    for g in gpus:
        dropped = "red" if fell_in_gap(g) else ""
        cells: list[str | Text] = [str(g.index), num(g.util_before), Text(num(g.util_min), dropped),
                                   Text(num(g.util_mean), dropped)]
        if wide:
            cells.append(rate(g.pcie_peak_kbps))
        cells.append(Text(num(g.temp_max), "bold red" if hot is not None and g.index == hot.index else ""))
        if wide:
            cells.append(num(g.power_max))
        cells.append(",".join(g.throttle))
        table.add_row(*cells)
    return table


def log_text(lines: list[ShownLine], everything: bool, around: float | None = None) -> Text:
    """One row per line, explaining ones marked ``▶``; by default the quiet ones far from the gap fold away."""
    if not lines:
        return Text("no log lines in this window", "dim")
    folded = 0
    if everything:
        lines = lines[-RAW_LINES:]
    else:
        lines, folded = fold_quiet(lines, around, QUIET_LINES)
    out = Text()
    for shown in lines:
        line = shown.line
        style = SEVERITY_STYLE.get(line.severity, "")
        out.append("▶ " if shown.explains else "  ", "bold red" if shown.explains else "")
        out.append(f"{clock(line.t)} {line.text if everything else display(line)}\n",
                   f"bold {style}".strip() if shown.explains else (style or "default"))
    if folded:
        out.append(f"  … {folded} more lines further from the gap (a: show every line)\n", "dim")
    out.rstrip()
    return out


class StragglerDetail(Dialog[None]):
    BINDINGS = [Binding("escape,q,enter", "dismiss(None)", "Close"),
                Binding("a", "toggle_everything", "every line")]

    DEFAULT_CSS = """
    StragglerDetail { align: center middle; }
    StragglerDetail > VerticalScroll { width: 94%; height: auto; max-height: 92%; border: thick $error;
        background: $surface; padding: 0 1; }
    StragglerDetail .section { text-style: bold; color: $text-muted; }
    StragglerDetail #straggler-cause { text-style: bold; }
    StragglerDetail #straggler-evidence { padding-left: 2; }
    StragglerDetail #straggler-log { text-wrap: nowrap; text-overflow: ellipsis; }
    """

    FOLLOW_S = 1.0
    """How often an open view asks ``cause_of`` again (the cockpit re-attributes at most once a second)."""

    def __init__(self, evidence: GapEvidence, cause: Attribution | None = None,
                 cause_of: Callable[[], Attribution | None] | None = None) -> None:
        """``cause_of``: the cockpit's current answer for this straggler (followed while the view is open)."""
        super().__init__()
        self.evidence = evidence
        self.cause = cause
        """Why it was slow (:mod:`kimitui.analysis.causes`); None while the cockpit has not attributed it."""
        self._cause_of = cause_of
        self.everything = False
        """``a``: every line as it came (polling and each rank's copy) instead of what an operator reads."""

    def compose(self) -> ComposeResult:
        ev, v = self.evidence, self.evidence.gap
        with VerticalScroll():
            yield Static(self._cause_text(), id="straggler-cause")
            yield Static(self._evidence_text(), id="straggler-evidence")
            yield Static(Text(headline(ev, cause=self.cause)), id="straggler-headline")
            yield Static(Text(self._facts(), "dim"), id="straggler-facts")
            if v is None:
                yield Static("This straggler has no gap window (no gap_start/gap_end recorded).")
                return
            yield Static("Tokens since sent (the gap red); the GPUs' mean utilisation under them",
                         classes="section")
            yield RequestTimeline(ev, id="straggler-timeline")
            yield Static(self._log_title(), classes="section", id="straggler-log-title")
            yield Static(log_text(gap_lines(v), False, ev.straggler.gap_start), id="straggler-log")
            yield Static(self._gpu_title(), classes="section", id="straggler-gpus-title")
            gpus = in_gap_gpus(ev)
            yield Static(gpu_table(gpus) if gpus else Text("no GPU samples kept for this window", "dim"),
                         id="straggler-gpus")

    def _evidence_text(self) -> Text:
        return Text("\n".join(f"· {line}" for line in evidence_lines(self.cause)) if self.cause is not None else "")

    def _follow_cause(self) -> None:
        """Show the cockpit's newest answer when it changed (a late line the link delivered)."""
        if self.closed:  # closed already: its widgets are being removed
            return
        cause = self._cause_of() if self._cause_of is not None else None
        if cause is None or cause == self.cause:
            return
        self.cause = cause
        self.query_one("#straggler-cause", Static).update(self._cause_text())
        self.query_one("#straggler-headline", Static).update(Text(headline(self.evidence, cause=cause)))
        evidence = self.query_one("#straggler-evidence", Static)
        evidence.update(self._evidence_text())
        evidence.display = True

    def _cause_text(self) -> Text:
        if self.cause is None:
            return Text("Cause: not attributed yet (kimitui attributes a straggler when its level's result lands)",
                        "dim")
        style = "bold red" if self.cause.known and self.cause.confidence == "high" else "bold yellow" if self.cause.known else "bold"
        return Text(cause_headline(self.cause) + ".", style)

    def _gpu_title(self) -> str:
        ev = self.evidence
        s, inside = ev.straggler, in_gap_samples(ev)
        if not inside or s.gap_start is None:
            return f"GPUs around the gap ({len(ev.gap.gpu_samples) if ev.gap else 0} samples)"
        return (f"GPUs in the gap {clock(s.gap_start)}–{clock(s.gap_end or s.gap_start)} ({len(inside)} samples): "
                "util % before, min, mean")

    def _facts(self) -> str:
        s, r = self.evidence.straggler, self.evidence.result
        parts = []
        if r is not None:
            parts.append(f"sent {clock(r.sent)}")
            if r.e2e_s is not None:
                parts.append(f"{r.completion_tokens} tokens in {r.e2e_s:.1f} s")
            if r.ttft_s is not None:
                parts.append(f"first token after {r.ttft_s:.2f} s")
        if s.reason:
            parts.append(f"flagged for: {s.reason}")
        if r is None or not r.chunk_offsets_ms:
            parts.append("no per-chunk times kept for this request")
        return " · ".join(parts)

    def _log_title(self) -> str:
        v = self.evidence.gap
        if v is None:
            return ""
        if self.everything:
            return f"Gap log: all {len(v.log_lines)} lines as they came (a: polling hidden, ranks merged)"
        shown = len(gap_lines(v))
        polling = hidden_polling(v)
        hid = f"{polling} kimitui polls hidden, " if polling else ""
        return f"Gap log: {shown} lines ({hid}ranks merged), ▶ may explain it"

    def on_mount(self) -> None:
        if self.closed:  # closed already: its widgets are being removed
            return
        body = self.query_one(VerticalScroll)
        body.border_title = f"Straggler {self.evidence.straggler.request_id}"
        body.border_subtitle = "a every line · esc close" if self.evidence.gap is not None else "esc close"
        self.query_one("#straggler-evidence", Static).display = self.cause is not None
        self._fit(self.app.size.width, self.app.size.height)
        if self._cause_of is not None:
            self.set_interval(self.FOLLOW_S, self._follow_cause, name="straggler-cause")

    def on_resize(self, event: events.Resize) -> None:
        if self.closed:  # closed already: its widgets are being removed
            return
        self._fit(event.size.width, event.size.height)

    def _fit(self, width: int, height: int) -> None:
        """The frame fills a small terminal; the timeline grows with the height (``timeline_rows``)."""
        small = width < 100 or height < 30
        body = self.query_one(VerticalScroll)
        body.styles.width = "100%" if small else "94%"
        body.styles.max_height = "100%" if small else "92%"
        for timeline in self.query(RequestTimeline):
            timeline.styles.height = timeline_rows(height, bool(self.evidence.tokens()))
        gpus = in_gap_gpus(self.evidence)
        if gpus:
            self.query_one("#straggler-gpus", Static).update(gpu_table(gpus, width))

    def action_toggle_everything(self) -> None:
        v = self.evidence.gap
        if v is None:
            return
        self.everything = not self.everything
        lines = gap_lines(v, everything=self.everything)
        log = log_text(lines, self.everything, self.evidence.straggler.gap_start)
        self.query_one("#straggler-log", Static).update(log)
        self.query_one("#straggler-log-title", Static).update(self._log_title())
