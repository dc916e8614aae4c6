"""The plan as one self-contained SVG: no dependency, the same bytes for the same program.

Layout, top to bottom: a header (function, placements, totals); the modules as boxes, in
one column per pipeline stage (without stages, in up to three columns in program order),
each with its op count, the distributions of the values it computes (most frequent first)
and its costliest boxings in orange with their collectives and bytes (those that move
nothing counted in one muted line); boxings that cross stages as arrows between the boxes
of their producer and user; a table of the boxings (identical ones counted once, the
costliest first); then each timeline, one row per rank. A large program stays readable:
modules are merged to at most `MODULES` boxes (PlanFacts.collapsed), equal boxings are
counted once, and each box and the table show only the costliest; the HTML page (html.py)
lists every op and boxing.
"""

from __future__ import annotations

from collections import Counter
from html import escape

from .facts import BoxingFact, ModuleFact, PlanFacts, human_bytes
from .timeline import Timeline

__all__ = ["render_svg"]

FONT = 12
CHAR = 7.3  # width of a monospace character at FONT px
LINE = 17
PAD = 16
BOX_W = 430
GAP = 240  # between stage columns: room for the labels of cross-stage arrows
MODULES = 24  # module boxes at most: deeper paths are merged (PlanFacts.collapsed)
VALUES = 4  # value lines per module box
BOXINGS = 6  # boxing lines per module box (the costliest; the HTML page lists every one)
BOXING_ROWS = 40  # rows of the boxing table in the picture (all of them in the HTML page)
COLORS = {"forward": "#cfe2ff", "backward": "#d1e7dd", "update": "#e2e3e5", "other": "#fff3cd"}
STAGE_COLORS = ("#e7f0fd", "#fdf1e7", "#eaf7ee", "#f5eafb", "#fbeaea", "#eefafa")
ORANGE, ORANGE_BG = "#c25400", "#ffe8d6"
LOCAL, LOCAL_BG = "#8a7560", "#f7f2ec"  # a boxing that moves nothing between ranks


class _Canvas:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.width = 0.0
        self.height = 0.0

    def _grow(self, x: float, y: float) -> None:
        self.width, self.height = max(self.width, x), max(self.height, y)

    def rect(self, x, y, w, h, fill, stroke="#888", rx=4, cls="") -> None:
        c = f' class="{cls}"' if cls else ""
        self.parts.append(f'<rect{c} x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" '
                          f'rx="{rx}" fill="{fill}" stroke="{stroke}"/>')  # fmt: skip
        self._grow(x + w, y + h)

    def text(self, x, y, s, *, size=FONT, weight="normal", fill="#222", anchor="start",
             cls="", width: float | None = None) -> None:  # fmt: skip
        if width is not None:
            s = fit(s, width, size)
        c = f' class="{cls}"' if cls else ""
        self.parts.append(f'<text{c} x="{x:.1f}" y="{y:.1f}" font-size="{size}" '
                          f'font-weight="{weight}" fill="{fill}" text-anchor="{anchor}">'
                          f"{escape(s)}</text>")  # fmt: skip
        self._grow(x + (len(s) * CHAR * size / FONT if anchor == "start" else 0), y + 4)

    def line(self, x1, y1, x2, y2, stroke=ORANGE, width=2, arrow=True) -> None:
        head = ' marker-end="url(#arrow)"' if arrow else ""
        self.parts.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
                          f'stroke="{stroke}" stroke-width="{width}"{head}/>')  # fmt: skip

    def svg(self, title: str) -> str:
        w, h = int(self.width + PAD), int(self.height + PAD)
        return "\n".join([
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
            f'viewBox="0 0 {w} {h}" xml:space="preserve" '
            'font-family="DejaVu Sans Mono, Menlo, Consolas, monospace">',
            f"<title>{escape(title)}</title>",
            "<style>text { white-space: pre; }</style>",
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
            f'fill="{ORANGE}"/></marker></defs>',
            f'<rect x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>',
            *self.parts,
            "</svg>",
        ]) + "\n"  # fmt: skip


def fit(s: str, width: float, size: float = FONT) -> str:
    """`s`, cut with an ellipsis to fit `width` px."""
    n = max(4, int(width / (CHAR * size / FONT)))
    return s if len(s) <= n else s[: n - 1] + "…"


def module_name(scope: str) -> str:
    return scope or "(build, outside modules)"


def _op_summary(m: ModuleFact) -> str:
    kinds = Counter(op.name for op in m.ops)
    top = ", ".join(f"{k} x{n}" if n > 1 else k for k, n in kinds.most_common(4))
    more = "" if len(kinds) <= 4 else ", …"
    return f"{len(m.ops)} ops: {top}{more}" if m.ops else "no ops"


def _phase_summary(m: ModuleFact) -> str:
    ph = m.phases()
    if set(ph) <= {"untagged"}:
        return ""
    return " · ".join(f"{n} {p}" for p, n in sorted(ph.items()))


def merged(boxings: list[BoxingFact]) -> list[tuple[BoxingFact, int]]:
    """Boxings with the same change, collectives and module, counted once (first kept)."""
    seen: dict[tuple, list] = {}
    for b in boxings:
        key = (b.dst_scope or b.src_scope or b.scope, b.label(), b.shape)
        seen.setdefault(key, [b, 0])[1] += 1
    return [(b, n) for b, n in seen.values()]


def _module_lines(m: ModuleFact, home: str) -> list[tuple[str, str]]:
    """(kind, text) lines of a module box below its title."""
    lines = [("ops", _op_summary(m))]
    phases = _phase_summary(m)
    if phases:
        lines.append(("ops", phases))
    values = m.values()
    for (shape, placement, sbp), n in values[:VALUES]:
        where = "" if placement in ("", home) else f" @ {placement}"
        lines.append(("value", f"{shape}  {sbp}{where}" + (f"  x{n}" if n > 1 else "")))
    if len(values) > VALUES:
        lines.append(("value", f"+{len(values) - VALUES} more distributions"))
    inside = merged([b for b in m.boxings if not b.crosses_stages])
    moving = sorted((bn for bn in inside if bn[0].moves), key=lambda bn: -bn[0].nbytes * bn[1])
    for b, n in moving[:BOXINGS]:
        count = f"{n}x " if n > 1 else ""
        lines.append(("boxing", f"{count}{b.shape} {b.label()}"))
    if len(moving) > BOXINGS:
        rest = moving[BOXINGS:]
        total = human_bytes(sum(b.nbytes * n for b, n in rest))
        lines.append(("boxing", f"+{sum(n for _, n in rest)} more boxings, {total}"))
    local = sum(n for b, n in inside if not b.moves)
    if local:
        lines.append(("local-boxing", f"{local} local boxing{'s' if local > 1 else ''} "
                      "(slices, partial sums: no transfer)"))  # fmt: skip
    return lines


def _layout_columns(facts: PlanFacts) -> list[tuple[str, list[ModuleFact]]]:
    modules = facts.collapsed(MODULES)
    if facts.stages:
        cols: list[tuple[str, list[ModuleFact]]] = [
            (f"stage {s.index} · {s.placement}", []) for s in facts.stages]  # fmt: skip
        for m in modules:
            cols[m.stage if m.stage is not None else 0][1].append(m)
        return cols
    n = max(1, min(3, (len(modules) + 3) // 4))
    per = -(-len(modules) // n) if modules else 0
    name = " · ".join(facts.placements) or "local"
    return [(name if i == 0 else "", modules[i * per : (i + 1) * per]) for i in range(n)]


def _draw_modules(c: _Canvas, facts: PlanFacts, y0: float) -> tuple[float, dict]:
    """The module boxes; returns the bottom y and each module's box (x, y, w, h, column)."""
    only = facts.placements[0] if len(facts.placements) == 1 else ""
    boxes: dict[str, tuple[float, float, float, float, int]] = {}
    bottom = y0
    for col, (head, modules) in enumerate(_layout_columns(facts)):
        x = PAD + col * (BOX_W + (GAP if facts.stages else 24))
        if facts.stages:
            c.rect(x - 6, y0 - 4, BOX_W + 12, 26, STAGE_COLORS[col % len(STAGE_COLORS)],
                   stroke="#666", cls="stage")  # fmt: skip
        c.text(x, y0 + 14, head, weight="bold", cls="stage-label", width=BOX_W)
        y = y0 + 34
        for m in modules:
            home = facts.stages[m.stage].placement if m.stage is not None else only
            lines = _module_lines(m, home)
            h = LINE * (len(lines) + 1) + 10
            fill = STAGE_COLORS[(m.stage or 0) % len(STAGE_COLORS)] if facts.stages else "#f4f6fa"
            c.rect(x, y, BOX_W, h, fill, cls="module")
            c.text(x + 8, y + LINE, module_name(m.scope), weight="bold", cls="module-name",
                   width=BOX_W - 16)  # fmt: skip
            ty = y + LINE
            for kind, text in lines:
                ty += LINE
                if kind in ("boxing", "local-boxing"):
                    fg, bg = (ORANGE, ORANGE_BG) if kind == "boxing" else (LOCAL, LOCAL_BG)
                    c.rect(x + 4, ty - LINE + 4, BOX_W - 8, LINE, bg, stroke=fg, rx=2)
                    c.text(x + 8, ty, text, fill=fg, cls=kind, width=BOX_W - 16)
                else:
                    c.text(x + 8, ty, text, cls=kind, width=BOX_W - 16)
            boxes[(m.scope, m.stage)] = (x, y, BOX_W, h, col)
            y += h + 12
        bottom = max(bottom, y)
    return bottom, boxes


def _box_of(scope: str, stage: int | None, boxes: dict) -> tuple | None:
    """The box a module path of a stage is drawn in: its own, or that of the module it is
    merged into."""
    while (scope, stage) not in boxes and "." in scope:
        scope = scope.rsplit(".", 1)[0]
    return (scope, stage) if (scope, stage) in boxes else None


def _draw_crossings(c: _Canvas, facts: PlanFacts, boxes: dict) -> None:
    """Arrows for the boxings between stages, one per (producer, user, label), counted."""
    crossing: Counter = Counter()
    first: dict[tuple, BoxingFact] = {}
    for b in facts.boxings:
        src = _box_of(b.src_scope, b.src_stage, boxes)
        dst = _box_of(b.dst_scope, b.dst_stage, boxes)
        if b.crosses_stages and src is not None and dst is not None:
            key = (src, dst, b.label(), b.shape)
            crossing[key] += 1
            first.setdefault(key, b)
    lanes: Counter = Counter()
    for key in sorted(crossing, key=lambda k: (boxes[k[0]][:2], boxes[k[1]][:2], k[2:])):
        b, n = first[key], crossing[key]
        sx, sy, sw, sh, scol = boxes[key[0]]
        dx, dy, dw, dh, dcol = boxes[key[1]]
        lane = lanes[(key[0], key[1])]
        lanes[(key[0], key[1])] += 1
        forward = dcol > scol
        x1 = sx + sw if forward else sx
        x2 = dx if forward else dx + dw
        y1 = sy + 14 + 16 * lane + (0 if forward else sh / 2)
        y2 = dy + 14 + 16 * lane + (0 if forward else dh / 2)
        y1, y2 = min(y1, sy + sh - 4), min(y2, dy + dh - 4)
        c.line(x1, y1, x2, y2)
        label = f"{n}x " if n > 1 else ""
        c.text((x1 + x2) / 2, (y1 + y2) / 2 - 5, label + b.collectives_text(), fill=ORANGE,
               anchor="middle", cls="crossing", size=11)  # fmt: skip


def _draw_table(c: _Canvas, facts: PlanFacts, y: float) -> float:
    rows = sorted(merged(facts.boxings), key=lambda bn: (-bn[0].nbytes * bn[1], bn[0].index))
    c.text(PAD, y, f"Boxings: {len(facts.boxings)} ({len(rows)} distinct), "
           f"{human_bytes(facts.total_bytes())} sent and received per step by the busiest rank",
           weight="bold", size=13)  # fmt: skip
    y += LINE + 4
    if not rows:
        c.text(PAD, y, "(no boxing: every value is where its users need it)", cls="boxing")
        return y + LINE
    head = (f"{'n':>3}  {'module':<24} {'tensor':<16} {'change':<26} collectives (ranks), "
            "the costliest first")  # fmt: skip
    c.text(PAD, y, head, weight="bold")
    for b, n in rows[:BOXING_ROWS]:
        y += LINE
        ranks = "; ".join(f"{col.label()} ({','.join(map(str, col.ranks))})"
                          for col in b.collectives) or "no communication"  # fmt: skip
        home = module_name(b.dst_scope or b.src_scope or b.scope)
        row = f"{n:>3}  {fit(home, 24 * CHAR):<24} {fit(b.shape, 16 * CHAR):<16} "
        row += f"{fit(b.change(), 26 * CHAR):<26} {ranks}"
        c.text(PAD, y, row, fill=ORANGE if b.moves else LOCAL, cls="boxing-row")
    if len(rows) > BOXING_ROWS:
        y += LINE
        c.text(PAD, y, f"+{len(rows) - BOXING_ROWS} more (the HTML page lists every one)")
    return y + LINE


def _draw_timeline(c: _Canvas, t: Timeline, y: float, stage_of: dict[int, int]) -> float:
    c.text(PAD, y, t.title, weight="bold", size=13, cls="timeline-title")
    y += 10
    lo, hi = t.span()
    cell = 40.0 if t.unit == "slot" else max(1e-9, (900.0 / max(hi - lo, 1e-9)))
    x0 = PAD + 130
    for rank in t.ranks():
        stage = f" (stage {stage_of[rank]})" if rank in stage_of else ""
        c.text(PAD, y + 19, f"rank {rank}{stage}", cls="rank")
        for s in (s for s in t.slots if s.rank == rank):
            x, w = x0 + (s.start - lo) * cell, max(2.0, (s.end - s.start) * cell)
            c.rect(x, y + 4, w - 2, 22, COLORS.get(s.kind, COLORS["other"]), stroke="#555",
                   rx=2, cls="slot")  # fmt: skip
            c.text(x + (w - 2) / 2, y + 19, fit(s.label, w), anchor="middle", size=11,
                   cls="slot-label")  # fmt: skip
        y += 28
    ticks = f"0 … {hi - lo:g} {t.unit}{'s' if t.unit == 'slot' else ''}"
    c.text(x0, y + 14, ticks, size=10, fill="#666")
    return y + LINE + 8


def render_svg(facts: PlanFacts, timelines: list[Timeline]) -> str:
    """The picture of `facts` and `timelines` (see the module docstring)."""
    c = _Canvas()
    c.text(PAD, PAD + 12, f"{facts.title}: parallel plan", weight="bold", size=16)
    n_ops = sum(len(m.ops) for m in facts.modules)
    c.text(PAD, PAD + 32, f"@{facts.function} · placements {', '.join(facts.placements) or '-'}"
           f" · {n_ops} ops in {len(facts.modules)} modules · {len(facts.boxings)} boxings",
           cls="summary")  # fmt: skip
    y = PAD + 50
    if facts.stages:
        c.text(PAD, y, f"pipeline: {len(facts.stages)} stages, {facts.micro_batches} "
               f"micro-batches, {facts.schedule}", cls="summary")  # fmt: skip
        y += LINE
    if facts.inputs:
        shown = Counter(f"{s} {d}" for s, _, d in facts.inputs)
        text = ", ".join(f"{k}" + (f" x{n}" if n > 1 else "") for k, n in shown.most_common(6))
        c.text(PAD, y, f"inputs: {text}{', …' if len(shown) > 6 else ''}", cls="summary",
               width=2 * BOX_W + GAP)  # fmt: skip
        y += LINE
    bottom, boxes = _draw_modules(c, facts, y + 6)
    _draw_crossings(c, facts, boxes)
    y = _draw_table(c, facts, bottom + 14)
    stage_of = {r: s.index for s in facts.stages for r in s.ranks}
    for t in timelines:
        y = _draw_timeline(c, t, y + 16, stage_of)
    legend = ("legend: [S(d)] split along d, [B] broadcast, [P] partial sum; orange: boxing "
              "(collective, bytes one rank moves); F/B/U: forward/backward/update slot")
    c.text(PAD, y + 10, legend, size=10, fill="#555")
    return c.svg(f"{facts.title}: parallel plan")
