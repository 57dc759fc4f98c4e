"""Unicode line charts for plain-text reports (Markdown code blocks, terminals, chat).

Concurrency levels are spaced evenly (1, 8, 32, 64... are categories, not a
linear axis).  Each series has its own mark at its points (●, ○, ◆, ◇) and a
lighter one between them (·, ∘, ⋄, ˙), so two overlaid runs stay readable
without colour; ◉ marks points of two series in one cell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

MARKS = ("●", "○", "◆", "◇")
TRAILS = ("·", "∘", "⋄", "˙")
BOTH = "◉"
"""Two series' points in one cell."""
FLAG = "✗"
"""On the axis: a level that failed, was aborted or cut (no point drawn)."""


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 10 else f"{v:.3g}"


def line_chart(series: Mapping[str, Sequence[tuple[int, float | None]]], *, height: int = 12, col_width: int = 7,
               y_label: str = "tok/s", x_label: str = "concurrency",
               flagged: dict[int, str] | None = None) -> list[str]:
    """Rows of a chart of ``{name: [(concurrency, value), ...]}``; empty if there is nothing to draw.

    A ``None`` value (a figure a level does not have) draws no point.

    ``flagged`` (C -> status) are levels that are not ok: no point is drawn for them (their
    figures are not real), their tick is ``✗`` and the legend says why.
    """
    flagged = flagged or {}
    pts = {name: sorted((c, v) for c, v in s if v is not None) for name, s in series.items()}
    pts = {k: v for k, v in pts.items() if v}
    if not pts:
        return []
    xs = sorted({c for s in pts.values() for c, _ in s} | set(flagged))
    col = {c: i * col_width + col_width // 2 for i, c in enumerate(xs)}
    width = len(xs) * col_width
    top = max(v for s in pts.values() for _, v in s)
    top = top if top > 0 else 1.0
    grid = [[" "] * width for _ in range(height)]

    def row_of(v: float) -> int:
        return height - 1 - min(height - 1, max(0, round(v / top * (height - 1))))

    for k, (name, s) in enumerate(pts.items()):
        mark, trail = MARKS[k % len(MARKS)], TRAILS[k % len(TRAILS)]
        for (c0, v0), (c1, v1) in zip(s, s[1:]):
            x0, x1 = col[c0], col[c1]
            for x in range(x0 + 1, x1):
                r = row_of(v0 + (v1 - v0) * (x - x0) / (x1 - x0))
                if grid[r][x] == " ":
                    grid[r][x] = trail
        for c, v in s:
            r, x = row_of(v), col[c]
            grid[r][x] = BOTH if grid[r][x] in MARKS or grid[r][x] == BOTH else mark
    label_w = max(len(_fmt(top)), len(_fmt(0.0)), len(y_label))
    out = [f"{y_label:>{label_w}}"]
    for r, cells in enumerate(grid):
        value = top * (height - 1 - r) / (height - 1)
        label = _fmt(value) if r in (0, height // 2, height - 1) else ""
        out.append(f"{label:>{label_w}} ┤{''.join(cells).rstrip()}")
    flag_cols = {col[c] for c in flagged}
    axis = "".join(FLAG if x in flag_cols else "┬" if x in col.values() else "─" for x in range(width))
    out.append(f"{'':>{label_w}} └{axis}")
    ticks = "".join(f"{c:^{col_width}}" for c in xs)
    out.append(f"{'':>{label_w}}  {ticks.rstrip()}  {x_label}")
    legend = "   ".join(f"{MARKS[k % len(MARKS)]} {name}" for k, name in enumerate(pts))
    if any(BOTH in cells for cells in grid):
        legend += f"   {BOTH} both"
    if flagged:
        legend += f"   {FLAG} not drawn: " + ", ".join(f"C={c} {st}" for c, st in sorted(flagged.items()))
    out.append(f"{'':>{label_w}}  {legend}")
    return out
