"""The parallel plan's picture (flow.lowering.plan) of a tensor-parallel and a pipelined global
program over two ranks, in one process: the SVG and HTML parse and hold the modules, SBPs,
collectives with bytes, stages and slots; the output is deterministic; large programs are
collapsed by module; a measured timeline is drawn beside the schedule's; and the picture
renders in a headless Chromium (skipped, saying why, where none is installed)."""

from __future__ import annotations

import struct
import xml.etree.ElementTree as ET
import zlib
from html.parser import HTMLParser

import pytest
from xdsl.parser import Parser

from flow.dialect import make_context
from flow.lowering.plan import Timeline, build_plan
from flow.lowering.plan.browser import dump_dom, find_browser, screenshot

PLACE = '#flow.placement<"cpu", [0, 1]>'
TP = f"""
!x = tensor<8x4xf32, #flow.dist<{PLACE}, #flow.sbp<[S(1)]>>>
!w = tensor<4x6xf32, #flow.dist<{PLACE}, #flow.sbp<[S(0)]>>>
!y = tensor<8x6xf32, #flow.dist<{PLACE}, #flow.sbp<[B]>>>
func.func @tp(%a: !x, %b: !w) -> !y {{
  %c = flow.exp %a : !x loc("model.0"("m.py":3:1))
  %m = flow.matmul %c, %b : !x, !w -> !y loc("model.1"("m.py":4:1))
  func.return %m : !y
}}
"""


def _pp(schedule: str = "1f1b", micro: int = 2) -> str:
    """Two stages, `micro` micro-batches: exp on stage 0, tanh / neg on stage 1, back."""
    a = 'tensor<4xf32, #flow.dist<#flow.placement<"cpu", [0]>, #flow.sbp<[B]>>>'
    b = 'tensor<4xf32, #flow.dist<#flow.placement<"cpu", [1]>, #flow.sbp<[B]>>>'
    lines, grads = [], []
    for k in range(micro):
        fw = f'{{micro_batch = {k} : i64, pipeline_phase = "forward"}}'
        bw = f'{{micro_batch = {k} : i64, pipeline_phase = "backward"}}'
        lines += [
            f'%a{k} = flow.exp %x{k} {fw} : !a loc("first"("m.py":1:1))',
            f'%b{k} = flow.boxing %a{k} {fw} : !a -> !b loc("second"("m.py":2:1))',
            f'%c{k} = flow.tanh %b{k} {fw} : !b loc("second"("m.py":2:1))',
            f'%g{k} = flow.neg %c{k} {bw} : !b loc("second"("m.py":2:1))',
            f'%h{k} = flow.boxing %g{k} {bw} : !b -> !a loc("first"("m.py":1:1))',
            f'%d{k} = flow.mul %h{k}, %a{k} {bw} : !a loc("first"("m.py":1:1))',
        ]
        grads.append(f"%d{k}")
    up = '{micro_batch = 0 : i64, pipeline_phase = "update"}'
    total = grads[0]
    for i, g in enumerate(grads[1:]):
        lines.append(f'%s{i} = flow.add {total}, {g} {up} : !a loc("optimizer"("m.py":5:1))')
        total = f"%s{i}"
    args = ", ".join(f"%x{k}: !a" for k in range(micro))
    body = "\n  ".join(lines)
    return f"""
!a = {a}
!b = {b}
module attributes {{pipeline_stages = [#flow.placement<"cpu", [0]>, #flow.placement<"cpu", [1]>],
                    pipeline_schedule = "{schedule}"}} {{
func.func @step({args}) -> !a {{
  {body}
  func.return {total} : !a
}}
}}
"""


def _module(text: str):
    return Parser(make_context(), text).parse_module()


class _Text(HTMLParser):
    """The text and the tags of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.append(tag)

    def handle_data(self, data) -> None:
        self.text.append(data)


def _svg_texts(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]


def test_tensor_parallel_plan_shows_modules_sbps_and_the_all_reduce():
    plan = build_plan(_module(TP), title="tp")  # flow-infer-sbp runs first: it had not
    texts = _svg_texts(plan.svg())
    assert {"model.0", "model.1"} <= set(texts)
    assert "8x4xf32  [S(1)]" in texts and "8x6xf32  [P]" in texts
    assert "8x6xf32 [P] -> [B]: all_reduce 192 B" in texts
    assert any(t.startswith("Boxings: 1 (1 distinct), 192 B") for t in texts)
    assert not any("schedule" in t for t in texts)  # no pipeline, no timeline
    page = _Text()
    page.feed(plan.html())
    text = "".join(page.text)
    assert {"svg", "details", "table"} <= set(page.tags)
    assert "[S(1)], [S(0)] -> [P]" in text and "all_reduce" in text and "192" in text


def test_pipeline_plan_shows_stages_transfers_and_the_1f1b_slots_per_rank():
    plan = build_plan(_module(_pp("1f1b", 4)), title="pp")
    facts = plan.facts
    assert [s.ranks for s in facts.stages] == [(0,), (1,)]
    assert facts.micro_batches == 4 and facts.schedule == "1f1b"
    texts = _svg_texts(plan.svg())
    assert "stage 0 · cpu[0]" in texts and "stage 1 · cpu[1]" in texts
    assert "4x send/recv 16 B" in texts  # the activations forward, the gradients back
    assert "rank 0 (stage 0)" in texts and "rank 1 (stage 1)" in texts
    # stage 0's 1F1B slots: one warm-up forward, then alternating (flow-pipeline-schedule)
    row0 = [s.label for s in plan.timelines[0].slots if s.rank == 0]
    assert row0 == ["F0", "F1", "B0", "F2", "B1", "F3", "B2", "B3", "U"]
    starts = [s.start for s in plan.timelines[0].slots if s.rank == 0]
    assert starts[:3] == [0.0, 1.0, 3.0]  # B0 waits for stage 1's B0 (a bubble)


def test_gpipe_runs_every_forward_first():
    plan = build_plan(_module(_pp("gpipe", 3)))
    row1 = [s.label for s in plan.timelines[0].slots if s.rank == 1]
    assert row1 == ["F0", "F1", "F2", "B0", "B1", "B2", "U"]
    assert "GPIPE schedule: 2 stages x 3 micro-batches" in plan.timelines[0].title


def test_output_is_deterministic_and_the_program_is_left_as_it_was():
    module = _module(TP)
    before = str(module)
    first, second = build_plan(module).svg(), build_plan(module).svg()
    assert first == second and str(module) == before


def test_many_modules_collapse_to_their_parents():
    ops = "\n  ".join(
        f'%v{i} = flow.exp %v{i - 1} : tensor<4xf32> loc("blocks.{i // 6}.layer{i % 6}"(unknown))'
        for i in range(1, 121)
    )
    text = f"""func.func @big(%v0: tensor<4xf32>) -> tensor<4xf32> {{
  {ops}
  func.return %v120 : tensor<4xf32>
}}"""
    facts = build_plan(_module(text)).facts
    assert len(facts.modules) == 120
    collapsed = facts.collapsed(24)
    assert len(collapsed) == 21  # blocks.0 .. blocks.20
    assert all(m.scope.count(".") == 1 for m in collapsed)
    assert sum(len(m.ops) for m in collapsed) == 120
    assert len(facts.collapsed(8)) == 1  # down to `blocks`


def test_a_measured_timeline_from_a_chrome_trace():
    trace = {"traceEvents": [
        {"ph": "X", "pid": 0, "name": "F0", "ts": 0, "dur": 1500},
        {"ph": "X", "pid": 1, "name": "F0", "ts": 1600, "dur": 1000},
        {"ph": "X", "pid": 1, "name": "compile", "ts": 0, "dur": 90},  # not a slot
        {"ph": "i", "pid": 0, "name": "B0", "ts": 5},  # not a span
    ]}  # fmt: skip
    measured = Timeline.from_chrome_trace(trace, title="measured (profile)")
    assert [(s.rank, s.label, s.kind) for s in measured.slots] == [(0, "F0", "forward"),
                                                                   (1, "F0", "forward")]
    assert measured.span() == (0.0, 2.6)
    plan = build_plan(_module(_pp())).add_timeline(measured)
    texts = _svg_texts(plan.svg())
    assert "measured (profile)" in texts and "0 … 2.6 ms" in texts


def test_save_names_the_formats(tmp_path):
    plan = build_plan(_module(TP))
    assert plan.save(tmp_path / "p.svg").read_text().startswith("<svg")
    assert plan.save(tmp_path / "p.html").read_text().startswith("<!DOCTYPE html>")
    with pytest.raises(ValueError, match=r"\.svg, \.html, \.png"):
        plan.save(tmp_path / "p.pdf")
    assert plan._repr_svg_() == plan.svg() and "<svg" in plan._repr_html_()


def png_is_drawn(path) -> bool:
    """Whether a PNG holds a picture rather than one flat colour (its pixel bytes vary)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + n]
        pos += 12 + n
    return len(set(zlib.decompress(idat))) > 32


needs_browser = pytest.mark.skipif(
    find_browser() is None,
    reason="no headless Chromium (apt-get install chromium-headless-shell; .ci/run does)",
)


@needs_browser
@pytest.mark.parametrize("program", ["tp", "pp"])
def test_the_picture_renders_in_a_browser(tmp_path, program):
    plan = build_plan(_module(TP if program == "tp" else _pp()))
    page = plan.save(tmp_path / "plan.html")
    dom = dump_dom(page)
    want = (["model.0", "[S(1)]", "all_reduce 192 B"] if program == "tp"
            else ["stage 1 · cpu[1]", "send/recv 16 B", "rank 1 (stage 1)", "F1", "B1"])
    missing = [w for w in want if w not in dom.replace("&gt;", ">")]
    assert not missing, f"not in the rendered DOM: {missing}"
    png = plan.save(tmp_path / "plan.png")
    assert png_is_drawn(png)
    shot = screenshot(plan.save(tmp_path / "plan.svg"), tmp_path / "svg.png", 400, 300)
    assert png_is_drawn(shot)


def test_png_without_a_browser_says_how_to_get_one(tmp_path, monkeypatch):
    from flow.lowering.plan.browser import BrowserNotFoundError

    monkeypatch.setenv("FLOW_BROWSER", str(tmp_path / "no-such-browser"))
    with pytest.raises(BrowserNotFoundError, match="apt-get install chromium-headless-shell"):
        build_plan(_module(TP)).save(tmp_path / "plan.png")
