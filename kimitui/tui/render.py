"""Small text-rendering helpers shared by the panels (block sparklines, bars, numbers).

Hand-rolled on purpose: a fixed 0..max scale (Textual's Sparkline rescales to
its own min..max, so 95-97 % utilisation would look full-swing), cheap, and
deterministic for snapshot tests.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

BLOCKS = " ▁▂▃▄▅▆▇█"


def spark(values: Sequence[float], width: int, top: float = 100.0) -> str:
    """The last ``width`` values as block characters scaled to ``0..top``, left-padded."""
    if width <= 0:
        return ""
    tail = list(values)[-width:]
    top = top or 1.0
    chars = [BLOCKS[max(1, min(8, round(v / top * 8)))] for v in tail]  # a floor: zero is a value, not a gap
    return " " * (width - len(chars)) + "".join(chars)


def bar(fraction: float | None, width: int, full: str = "█", empty: str = "░") -> str:
    """A horizontal bar ``width`` cells wide, filled to ``fraction`` (clamped to 0..1)."""
    if fraction is None or width <= 0:
        return " " * max(width, 0)
    fill = round(max(0.0, min(1.0, fraction)) * width)
    return full * fill + empty * (width - fill)


def num(value: float | None, fmt: str = ".0f", none: str = "-") -> str:
    return none if value is None else format(value, fmt)


def rate(kbps: float | None) -> str:
    """PCIe throughput in KB/s as a short human figure (KB/s, MB/s, GB/s)."""
    if kbps is None:
        return "-"
    if kbps >= 1_000_000:
        return f"{kbps / 1_000_000:.1f}G"
    if kbps >= 1_000:
        return f"{kbps / 1_000:.0f}M"
    return f"{kbps:.0f}K"


def clock(t: float | None) -> str:
    """Wall time as HH:MM:SS in local time (what the operator's clock says)."""
    return "--:--:--" if t is None else time.strftime("%H:%M:%S", time.localtime(t))


def ms(seconds: float | None) -> str:
    """Seconds shown as ms below 10 s, else seconds."""
    if seconds is None:
        return "-"
    if seconds < 10:
        return f"{seconds * 1000:.0f}ms"
    return f"{seconds:.1f}s"
