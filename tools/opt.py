"""`flow-opt`: parse flow IR, verify it, run passes, print it (xDSL's opt driver).

Usage: `flow-opt FILE -p flow-lower-to-linalg,dce`, `flow-opt FILE -p flow-to-iree-input
--print-op-generic`, `flow-opt FILE --split-input-file --verify-diagnostics`.
`--plan-svg out.svg` (`--plan-html out.html`) also draws the parallel plan of the program the
passes leave (SBP inference runs first where it has not: flow.lowering.plan).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.frontend.mlir import MLIRFrontend
from xdsl.passes import ModulePass, PassPipeline
from xdsl.xdsl_opt_main import xDSLOptMain

from flow.dialect.parsing import LocatedVerifyException, parse_module
from flow.lowering import PIPELINES, expand_pipeline, get_all_passes, parse_pipeline_spec

from ._driver import run_reporting_errors

HANDOFF = "flow-to-iree-input"
"""The pipeline that ends every lowering to IREE input (DESIGN §2)."""


def handoff_pipelines() -> frozenset[str]:
    """The registry's named pipelines whose output is IREE input: `HANDOFF` and every pipeline
    whose last step is one of them (e.g. `flow-partition-to-iree-input`). flow-opt prints
    their output in generic form, the way it is handed to IREE."""
    ends = {HANDOFF}
    while True:
        more = {name for name, steps in PIPELINES.items()
                if name not in ends and steps and steps[-1].split("{")[0].strip() in ends}  # fmt: skip
        if not more:
            return frozenset(ends)
        ends |= more


@dataclasses.dataclass(frozen=True)
class FlowFrontend(MLIRFrontend):
    """MLIR text through flow's parser: linear-time lexing, bounded literals, located errors."""

    def parse(self, ctx: Context, input: IO[bytes], input_name: str = "input") -> ModuleOp:
        return parse_module(
            input.read(), input_name, ctx, allow_implicit_module=not self.no_implicit_module
        )


class FlowOptMain(xDSLOptMain):
    """xDSL's opt driver with flow's dialects and passes; named pipelines run pass by pass."""

    version_format = "flow-opt (xDSL {xdsl_version})"
    current_pass: ModulePass | None = None
    """The pass running when an error escapes, for the error message."""

    def register_all_dialects(self) -> None:
        from flow.dialect import make_context

        self.ctx = make_context()

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0):
        try:
            return super().parse_chunk(chunk, file_extension, start_offset)
        except LocatedVerifyException as err:  # xDSL shifts only ParseErrors by the chunk's line
            err.span = dataclasses.replace(err.span, line_offset=start_offset)
            raise

    def register_all_passes(self) -> None:
        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)

    def register_all_frontends(self) -> None:
        self.available_frontends["mlir"] = lambda: FlowFrontend

    def register_all_targets(self) -> None:
        from xdsl.targets import get_all_targets

        self.available_targets["mlir"] = get_all_targets()["mlir"]

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        for fmt in ("svg", "html"):
            arg_parser.add_argument(
                f"--plan-{fmt}",
                metavar="PATH",
                help=f"Draw the parallel plan of the resulting program as {fmt.upper()} "
                "(with --split-input-file, chunk i > 0 goes to PATH's stem + '-i').",
            )
        arg_parser.add_argument(
            "--traceback",
            default=False,
            action="store_true",
            help="Show the Python traceback of internal errors.",
        )

    def setup_pipeline(self) -> None:
        # Expand named pipelines so --print-between-passes and errors see each pass;
        # unknown names raise UnknownPassError listing the registered passes.
        named = parse_pipeline_spec(self.args.passes)  # names without their `{options}`
        if named and named[-1].name in handoff_pipelines():
            # Its output is what IREE receives: print it the way it is handed over.
            self.args.print_op_generic = True
        self.args.passes = ",".join(str(s) for s in expand_pipeline(self.args.passes))
        super().setup_pipeline()
        inner = self.pipeline.callback

        def callback(prev: ModulePass | None, module: ModuleOp, nxt: ModulePass | None) -> None:
            self.current_pass = None
            if inner is not None:
                inner(prev, module, nxt)
            self.current_pass = nxt

        self.pipeline = PassPipeline(self.pipeline.passes, callback)

    def apply_passes(self, prog: ModuleOp) -> None:
        super().apply_passes(prog)
        paths = [p for p in (self.args.plan_svg, self.args.plan_html) if p]
        if not paths:
            return
        from pathlib import Path

        from flow.lowering.plan import build_plan

        chunk, self.chunks_drawn = self.chunks_drawn, self.chunks_drawn + 1
        source = self.args.input_file or "<stdin>"
        plan = build_plan(prog, title=Path(source).name)
        for path in map(Path, paths):
            plan.save(path if chunk == 0 else path.with_stem(f"{path.stem}-{chunk}"))

    chunks_drawn = 0
    """Chunks whose plan has been drawn (`--plan-svg` with `--split-input-file`)."""

    def error_notes(self) -> list[str]:
        if self.current_pass is None:
            return []
        return [f"note: while running pass '{self.current_pass}'"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `flow-opt`; returns the exit code (0 ok, 1 error)."""
    args = list(sys.argv[1:] if argv is None else argv)
    tool: list[FlowOptMain] = []

    def body() -> None:
        tool.append(FlowOptMain("flow-opt: the flow dialect's modular optimizer", args))
        tool[0].run()

    def where() -> str:
        return (tool[0].args.input_file if tool else None) or "<stdin>"

    return run_reporting_errors(
        "flow-opt",
        body,
        where=where,
        notes=lambda: tool[0].error_notes() if tool else [],
        traceback="--traceback" in args,
    )


if __name__ == "__main__":
    sys.exit(main())
