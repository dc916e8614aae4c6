"""A picture of a global program's parallel plan: `build_plan(module).save("plan.svg")`.

`build_plan` reads the facts of a program after SBP inference (facts.py: ops by module
scope, each value's placement and SBP, every boxing with its collectives and bytes, the
pipeline stages and their schedule; it runs flow-infer-sbp first on a program that has not
been through it) and returns a `Plan`, which draws them as a self-contained SVG (svg.py) or
HTML page (html.py), or, through a headless Chromium (browser.py), a PNG. `flow-opt
--plan-svg out.svg` and `nn.Graph.plan()` make one. The pipeline timeline is the
schedule's (timeline.py); a measured one from a profile is added with `Plan.add_timeline`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp

from .facts import PlanFacts, plan_facts
from .timeline import Slot, Timeline, schedule_timeline

__all__ = ["Plan", "Slot", "Timeline", "build_plan", "needs_inference"]

FORMATS = (".svg", ".html", ".png")


def needs_inference(module: ModuleOp) -> bool:
    """Whether `module` has flow ops on global tensors without a chosen SBP signature."""
    from flow.dialect.attr_names import SIGNATURE_ATTR
    from flow.dialect.attrs import dist_of
    from flow.dialect.ops import FlowOp

    for op in module.walk():
        if isinstance(op, FlowOp) and SIGNATURE_ATTR not in op.attributes and any(
            dist_of(v.type) is not None for v in (*op.operands, *op.results)
        ):
            return True
    return False


def build_plan(module: ModuleOp, title: str = "") -> Plan:
    """The plan of `module` (left unchanged; see the module docstring)."""
    if needs_inference(module):
        from ..infer_sbp import infer_sbp

        module = module.clone()
        infer_sbp(module)
    return Plan(plan_facts(module, title))


class Plan:
    """A parallel plan to look at: `svg()`, `html()`, `save(path)`; a notebook shows it."""

    def __init__(self, facts: PlanFacts) -> None:
        self.facts = facts
        schedule = schedule_timeline(facts)
        self.timelines: list[Timeline] = [] if schedule is None else [schedule]

    def add_timeline(self, timeline: Timeline) -> Plan:
        """Draw `timeline` too (e.g. `Timeline.from_chrome_trace(profile)`: measured slots)."""
        self.timelines.append(timeline)
        return self

    def svg(self) -> str:
        from .svg import render_svg

        return render_svg(self.facts, self.timelines)

    def html(self) -> str:
        from .html import render_html

        return render_html(self.facts, self.svg())

    def _repr_svg_(self) -> str:
        return self.svg()

    def _repr_html_(self) -> str:
        return self.html()

    def save(self, path: str | Path) -> Path:
        """Write the plan to `path`: `.svg`, `.html`, or `.png` (a headless Chromium's
        screenshot of the SVG: browser.py)."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in FORMATS:
            raise ValueError(f"Plan.save: expected a path ending in {', '.join(FORMATS)}, "
                             f"got {str(path)!r}")  # fmt: skip
        if suffix == ".svg":
            path.write_text(self.svg(), encoding="utf-8")
        elif suffix == ".html":
            path.write_text(self.html(), encoding="utf-8")
        else:
            from .browser import screenshot

            svg = self.svg()
            width, height = _size(svg)
            with tempfile.TemporaryDirectory(prefix="flow-plan-") as tmp:
                page = Path(tmp) / "plan.svg"
                page.write_text(svg, encoding="utf-8")
                screenshot(page, path, width, height)
        return path


def _size(svg: str) -> tuple[int, int]:
    """The width and height an SVG of ours declares."""
    import re

    found = re.search(r'width="(\d+)" height="(\d+)"', svg)
    assert found is not None
    return int(found.group(1)), int(found.group(2))
