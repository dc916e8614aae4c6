"""The plan as one self-contained HTML page: the SVG picture, then every op and boxing.

Below the picture, one collapsible section per module lists each of its ops with its
result's shape, placement and SBP, the SBP signature flow-infer-sbp chose, its phase and
source line; a table lists every boxing with its collectives per rank. No script, no
external file: the page opens anywhere and is the same bytes for the same program.
"""

from __future__ import annotations

from html import escape

from .facts import PlanFacts, human_bytes
from .svg import module_name

__all__ = ["render_html"]

STYLE = """
body { font-family: DejaVu Sans, Helvetica, Arial, sans-serif; margin: 16px; color: #222; }
table { border-collapse: collapse; font-family: DejaVu Sans Mono, Menlo, monospace;
        font-size: 12px; margin: 6px 0 12px; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: left; }
th { background: #f0f0f0; }
tr.boxing td { color: #c25400; background: #fff3ea; }
summary { cursor: pointer; font-family: DejaVu Sans Mono, Menlo, monospace; }
"""


def _row(cells: list[str], cls: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return f"<tr{c}>" + "".join(f"<td>{escape(x)}</td>" for x in cells) + "</tr>"


def _head(cells: list[str]) -> str:
    return "<tr>" + "".join(f"<th>{escape(x)}</th>" for x in cells) + "</tr>"


def render_html(facts: PlanFacts, svg: str) -> str:
    """The page of `facts` around the picture `svg` (see the module docstring)."""
    title = f"{facts.title}: parallel plan"
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>",
           f"<h1>{escape(title)}</h1>", '<div class="picture">', svg, "</div>",
           "<h2>Modules</h2>"]  # fmt: skip
    for m in facts.modules:
        stage = "" if m.stage is None else f" · stage {m.stage}"
        out.append(f"<details><summary>{escape(module_name(m.scope))}: {len(m.ops)} ops, "
                   f"{len(m.boxings)} boxings{stage}</summary><table>")  # fmt: skip
        out.append(_head(["op", "result", "placement", "sbp", "signature", "phase", "line"]))
        for op in m.ops:
            phase = f"{op.phase} {op.micro_batch}" if op.phase else ""
            out.append(_row([op.name, op.shape, op.placement, op.sbp, op.signature, phase,
                             op.where]))  # fmt: skip
        for b in m.boxings:
            out.append(_row(["boxing", b.shape, f"{b.src[0]} -> {b.dst[0]}", b.change(),
                             b.collectives_text(), b.phase, b.where], "boxing"))  # fmt: skip
        out.append("</table></details>")
    out.append(f"<h2>Boxings</h2><p>{len(facts.boxings)} boxings, "
               f"{escape(human_bytes(facts.total_bytes()))} sent and received per step by "
               "the busiest rank.</p><table>")  # fmt: skip
    out.append(_head(["#", "module", "tensor", "change", "collective", "type", "bytes",
                      "ranks", "line"]))  # fmt: skip
    for b in facts.boxings:
        home = module_name(b.dst_scope or b.src_scope or b.scope)
        if not b.collectives:
            out.append(_row([str(b.index), home, b.shape, b.change(), "(none)", "", "0", "",
                             b.where], "boxing"))  # fmt: skip
        for c in b.collectives:
            detail = f"{c.fact.type} {c.fact.props}".strip()
            out.append(_row([str(b.index), home, b.shape, b.change(), c.kind, detail,
                             str(c.fact.nbytes), ",".join(map(str, c.ranks)), b.where],
                            "boxing"))  # fmt: skip
    out.append("</table>")
    if facts.stages:
        out.append("<h2>Pipeline stages</h2><table>")
        out.append(_head(["stage", "placement", "ranks", "slots (flow-pipeline-schedule)"]))
        for s in facts.stages:
            slots = " ".join("U" if p == "update" else f"{p[0].upper()}{k}" for p, k in s.slots)
            out.append(_row([str(s.index), s.placement, ",".join(map(str, s.ranks)), slots]))
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
