"""The GPU panel's words: the device header, the throttle labels, the one-glance fleet summary.

Pure functions of the model's GPU rows (no Textual, no Rich), so the panel only lays out and
colours, and tests read the figures without drawing.  Each piece is (text, severity): the
severity (``""``, ``"warn"``, ``"bad"``, ``"dim"``) is what the widget turns into a colour, so a
colour always means the same thing: yellow needs a look, red is wrong.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from kimitui.tui.model.gpu_state import GpuRow, Imbalance

Piece = tuple[str, str]
"""(text, severity): severity is "", "warn", "bad" or "dim"."""

THROTTLE_LABELS = {
    "sw_power_cap": "power cap", "hw_slowdown": "HW slowdown", "sw_thermal_slowdown": "thermal",
    "hw_thermal_slowdown": "HW thermal", "hw_power_brake_slowdown": "power brake", "sync_boost": "sync boost",
    "applications_clocks_setting": "app clocks", "app_clocks": "app clocks", "display_clock_setting": "display clocks",
    "board_limit": "board limit", "reliability": "reliability",
}
"""NVML clock-event reasons as an operator reads them; ``gpu_idle`` is not a slowdown and is never shown."""
IDLE_REASONS = frozenset({"gpu_idle"})
HARD_REASONS = frozenset({"hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown"})
"""Reasons that mean the hardware is protecting itself: red.  Any other non-idle reason is yellow."""

TEMP_WARN_C, TEMP_BAD_C = 80.0, 88.0
SPREAD_WARN, SPREAD_BAD = 10.0, 25.0
"""Utilisation spread (points between the busiest and the idlest GPU): EP stragglers show as a spread."""


def throttles(reasons: Sequence[str] | None) -> list[str]:
    """The active reasons worth showing (everything but idle)."""
    return [r for r in reasons or () if r not in IDLE_REASONS]


def throttle_piece(reasons: Sequence[str] | None) -> Piece | None:
    shown = throttles(reasons)
    if not shown:
        return None
    text = ",".join(THROTTLE_LABELS.get(r, r) for r in shown)
    return text, "bad" if any(r in HARD_REASONS for r in shown) else "warn"


def temp_severity(temp: float) -> str:
    return "bad" if temp >= TEMP_BAD_C else ("warn" if temp >= TEMP_WARN_C else "")


BALANCE_WARN = 0.85
BALANCE_BAD = 0.7
"""SGLang's balancedness (mean/max GPU load): below 0.85 one GPU carries 18 % over the mean; below 0.7, 43 %."""


def balance_severity(balance: float) -> str:
    return "bad" if balance < BALANCE_BAD else ("warn" if balance < BALANCE_WARN else "")


def spread_severity(spread: float) -> str:
    return "bad" if spread >= SPREAD_BAD else ("warn" if spread >= SPREAD_WARN else "")


def gib(mib: float) -> str:
    return f"{mib / 1024:.0f}"


# ----------------------------------------------------------------------------- the header line


def model_piece(rows: Sequence[GpuRow], compact: bool = False) -> str:
    """``8× NVIDIA H200 140G`` (or ``4× A 80G, 4× B 96G`` for a mixed host); ``compact`` drops the vendor."""
    names: Counter[tuple[str, str]] = Counter()
    for row in rows:
        name = row.static.name if row.static is not None and row.static.name else "GPU"
        total = row.static.memory_total_mib if row.static is not None else None
        total = total or (row.reading.mem_total_mib if row.reading is not None else None)
        if compact:
            name = name.removeprefix("NVIDIA ").removesuffix(" Server Edition").removesuffix(" Workstation Edition")
        names[(name, f" {gib(total)}G" if total else "")] += 1
    return ", ".join(f"{n}× {name}{mem}" for (name, mem), n in names.most_common())


@dataclass(frozen=True)
class Link:
    """The worst PCIe link on the host, against its maximum."""

    gen: int | None
    width: int | None
    max_gen: int | None
    max_width: int | None
    where: int | None
    """The GPU with the worst link when the GPUs differ, else None."""
    idle: bool = False
    """That GPU does nothing now: an idle GPU trains its link down to a lower generation to save power."""

    @property
    def degraded(self) -> bool:
        return ((self.gen is not None and self.max_gen is not None and self.gen < self.max_gen)
                or (self.width is not None and self.max_width is not None and self.width < self.max_width))

    @property
    def power_saving(self) -> bool:
        """Only the generation is down, on an idle GPU: normal (it trains back up under load), not a fault."""
        narrow = self.width is not None and self.max_width is not None and self.width < self.max_width
        return self.degraded and self.idle and not narrow


def pcie_link(rows: Sequence[GpuRow]) -> Link | None:
    """None when no GPU says anything about its link."""
    links = []
    for row in rows:
        s, r = row.static, row.reading
        gen, width = (r.pcie_gen, r.pcie_width) if r is not None else (None, None)
        max_gen, max_width = (s.pcie_max_gen, s.pcie_max_width) if s is not None else (None, None)
        if gen is not None or width is not None or max_gen is not None or max_width is not None:
            # the worst link: the largest lack of generation, then of width, against its own maximum
            lack = ((max_gen or 0) - (gen if gen is not None else max_gen or 0),
                    (max_width or 0) - (width if width is not None else max_width or 0))
            idle = r is not None and r.util_pct is not None and r.util_pct < 1
            links.append((lack, row.index, Link(gen, width, max_gen, max_width, None, idle)))
    if not links:
        return None
    lack, index, worst = max(links, key=lambda x: (x[0], -x[1]))
    same = all(link == worst for _, _, link in links)
    return worst if same else Link(worst.gen, worst.width, worst.max_gen, worst.max_width, index, worst.idle)


def link_pieces(link: Link, short: bool = False) -> list[Piece]:
    """``PCIe Gen5 x16 (max Gen5 x16)``; the current link coloured when it trained below its maximum.

    ``short``: a link at its maximum says ``= max`` instead of repeating it."""
    def gw(gen: int | None, width: int | None) -> str:
        return " ".join(p for p in (f"Gen{gen}" if gen is not None else "", f"x{width}" if width is not None else "")
                        if p) or "?"

    where = f"GPU{link.where} " if link.where is not None else ""
    now = (f"PCIe {where}{gw(link.gen, link.width)}", "warn" if link.degraded and not link.power_saving else "")
    if link.max_gen is None and link.max_width is None:
        return [now]
    if short and not link.degraded:
        return [now, (" = max", "dim")]
    idle = ", idle" if link.power_saving else ""
    return [now, (f" (max {gw(link.max_gen, link.max_width)}{idle})", "" if link.degraded and not idle else "dim")]


def header_pieces(rows: Sequence[GpuRow], driver: str | None, cuda: str | None, width: int = 10_000) -> list[Piece]:
    """``8× NVIDIA H200 140G · driver 575.57.08 · CUDA 12.9 · PCIe Gen5 x16 (max Gen5 x16)`` in ``width``:
    the vendor goes first, then the CUDA version, the driver, the link's maximum; the model and the
    current link stay (a degraded link is what the line is for)."""
    link = pcie_link(rows)
    for compact, keep in ((False, 4), (True, 4), (True, 3), (True, 2), (True, 1)):
        link_parts = link_pieces(link, short=keep < 4) if link is not None else []
        groups: list[list[Piece]] = [[(model_piece(rows, compact), "bold")]]
        extras = [[(f"driver {driver}", "")] if driver else [], [(f"CUDA {cuda}", "")] if cuda else []]
        groups += [g for g in extras[:max(0, keep - 2)] if g]  # CUDA dropped first, then the driver
        if link_parts:
            groups.append(link_parts if keep > 1 or (link is not None and link.degraded) else link_parts[:1])
        out: list[Piece] = []
        for g in groups:
            out += ([(" · ", "dim")] if out else []) + g
        if sum(len(t) for t, _ in out) <= width:
            return out
    return out


# ----------------------------------------------------------------------------- the fleet summary


def figure_pieces(rows: Sequence[GpuRow], imbalance: Imbalance | None, throttling: bool = True,
                  balance: float | None = None) -> list[Piece]:
    """``util 85–88% (mean 86) · mem 85/140G · 62–69°C · 3.9/5.6kW · spread 3 · no throttling``.

    Worst-first where it matters: a throttled GPU or a hot one is named, so a one-row summary
    still says which GPU to look at.
    """
    out: list[Piece] = []
    utils = [u for r in rows if (u := r.value("util_pct")) is not None]
    if utils:
        lo, hi = min(utils), max(utils)
        mean = f" (mean {sum(utils) / len(utils):.0f})" if round(lo) != round(hi) else ""
        out.append((f"util {lo:.0f}–{hi:.0f}%{mean}" if mean else f"util {lo:.0f}%", ""))
    mem = [(used, r.static.memory_total_mib if r.static is not None else None) for r in rows
           if (used := r.value("mem_used_mib")) is not None]
    if mem:
        used, total = max(mem, key=lambda m: m[0])
        out.append((f"mem {gib(used)}/{gib(total)}G" if total else f"mem {gib(used)}G", ""))
    temps = [(t, r.index) for r in rows if (t := r.value("temp_c")) is not None]
    if temps:
        (lo_t, _), (hi_t, hot) = min(temps), max(temps)
        out.append((f"{lo_t:.0f}–{hi_t:.0f}°C" if round(lo_t) != round(hi_t) else f"{hi_t:.0f}°C", temp_severity(hi_t)))
    watts = [w for r in rows if (w := r.value("power_w")) is not None]
    if watts:
        limits = [lim for r in rows if (lim := _limit(r)) is not None]
        cap = f"/{sum(limits) / 1000:.1f}" if len(limits) == len(watts) else ""
        out.append((f"{sum(watts) / 1000:.1f}{cap}kW", ""))
    if balance is not None:  # the server's own expert balance says more than the util spread
        out.append((f"expert balance {balance:.2f}", balance_severity(balance)))
    elif imbalance is not None:
        severity = spread_severity(imbalance.spread)
        low = f" (GPU{imbalance.low_index})" if severity else ""  # who lags, when one does
        out.append((f"spread {imbalance.spread:.0f} pts{low}", severity))
    if throttling:
        throttled = throttle_summary(rows)
        out.insert(1 if utils and throttled[1] != "dim" else len(out), throttled)  # a slowdown right after util
    return out


def _limit(row: GpuRow) -> float | None:
    r = row.reading
    return (r.power_limit_w if r is not None else None) or (row.static.power_limit_w if row.static else None)


def throttle_summary(rows: Sequence[GpuRow]) -> Piece:
    """``no throttling``, or the worst throttled GPU and how many more are."""
    hit = [(row.index, piece) for row in rows if row.reading is not None
           and (piece := throttle_piece(row.reading.throttle_reasons)) is not None]
    if not hit:
        return "no throttling", "dim"
    hit.sort(key=lambda h: h[1][1] != "bad")  # a hardware slowdown first
    index, (text, severity) = hit[0]
    more = f" +{len(hit) - 1} GPU{'s' if len(hit) > 2 else ''}" if len(hit) > 1 else ""
    return f"GPU{index} {text}{more}", severity


def fit(pieces: Sequence[Piece], width: int, sep: str = " · ") -> list[Piece]:
    """The pieces that fit in ``width`` cells, in order, separated; a piece that does not fit is left out
    (a later, shorter one may still fit) rather than cut in the middle.  The first piece and the
    alarming ones (red, then yellow) are kept first: a one-line summary must still say what is wrong."""
    rank = {"bad": 0, "warn": 1}
    order = sorted(range(len(pieces)), key=lambda k: (k != 0, rank.get(pieces[k][1], 2), k))
    keep: set[int] = set()
    used = 0
    for k in order:
        extra = len(pieces[k][0]) + (len(sep) if keep else 0)
        if used + extra <= width:
            keep.add(k)
            used += extra
    out: list[Piece] = []
    for k in sorted(keep):
        if out:
            out.append((sep, "dim"))
        out.append(pieces[k])
    return out
