"""Running pass pipelines, and the text that crosses from xDSL to IREE.

IREE's MLIR owns the `flow` namespace and xDSL's custom printers differ from
upstream's (e.g. `linalg.matmul` maps), so the hand-off is generic-form text
with nothing of ours left in it.
"""

from __future__ import annotations

import os
import tempfile
from io import StringIO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from flow.targets import events

from ._registry import expand_pipeline, get_all_passes


class HandoffError(ValueError):
    """The module still holds flow ops or attributes, so IREE cannot take it."""


class PipelineError(RuntimeError):
    """A pass failed; the message names it and gives a repro command."""

    def __init__(self, message: str, pass_name: str, repro: str | None = None):
        super().__init__(message)
        self.pass_name = pass_name
        self.repro = repro


def to_iree_text(module: ModuleOp, *, debuginfo: bool = False) -> str:
    """`module` printed in generic form for IREE's parser; raises if anything `flow` remains.

    With `debuginfo`, op locations (user source lines) are printed too.
    """
    rec = events.ACTIVE
    if rec is None:
        return _iree_text(module, debuginfo)
    with rec.span("to_iree_text", "lower") as span:
        text = _iree_text(module, debuginfo)
    span.args["bytes"] = len(text)
    return text


def _iree_text(module: ModuleOp, debuginfo: bool) -> str:
    from xdsl.printer import Printer

    from ._iree_ops import IREE_OP_NAMES, IREE_TYPE_NAMES

    # IREE's own `flow.collective.*` / `flow.channel.*` (flow-lower-collectives-native) cross.
    leftover = sorted({op.name for op in module.walk()
                       if op.name.startswith("flow.") and op.name not in IREE_OP_NAMES})  # fmt: skip
    leftover += sorted({f"attribute {name} on {op.name}" for op in module.walk()
                        for name in op.attributes if name.startswith("flow.")})  # fmt: skip
    if leftover:
        raise HandoffError(
            f"cannot hand off to IREE: flow ops or attributes remain ({', '.join(leftover)}); "
            "run the flow-to-iree-input pipeline first"
        )
    out = StringIO()
    Printer(stream=out, print_generic_format=True, print_debuginfo=debuginfo).print_op(module)
    out.write("\n")
    text = out.getvalue()
    ours = text
    for name in IREE_TYPE_NAMES:
        ours = ours.replace(name, " " * len(name))
    for marker in ("#flow.", "!flow."):
        at = ours.find(marker)
        if at >= 0:
            line_no = text.count("\n", 0, at) + 1
            line = text[text.rfind("\n", 0, at) + 1 : text.find("\n", at)].strip()
            raise HandoffError(
                f"cannot hand off to IREE: a flow attribute or type remains "
                f"(line {line_no}: {line[:200]}); global tensors must be partitioned "
                "and lowered first (flow-to-iree-input)"
            )
    return text


def run_pipeline(
    module: ModuleOp,
    spec: str,
    *,
    ctx: Context | None = None,
    verify: bool = False,
    source: str | None = None,
) -> ModuleOp:
    """Apply the comma-separated pass pipeline `spec` to `module` in place and return it.

    Named pipelines expand to their passes. Unknown passes raise `UnknownPassError`
    listing the registered ones; a failing pass raises `PipelineError` naming it,
    with a `flow-opt` repro command on the IR it failed on (our passes check
    before they rewrite, so that is their input). With `verify`, the module is
    verified before the first pass and after every pass; it is off by default
    because xDSL's verifier costs about as much as the lowering (~1 s per 5,000
    `linalg.generic`) and IREE verifies the hand-off text again anyway.
    `source` names where the module came from (a file, a traced function), for errors.
    """
    if ctx is None:
        from flow.dialect import make_context

        ctx = make_context()
    of = f" ({source})" if source else ""
    registry = get_all_passes()
    steps = [(s, registry[s.name]().from_spec(s)) for s in expand_pipeline(spec)]
    if verify:
        try:
            module.verify()
        except Exception as err:
            raise PipelineError(f"invalid input{of} to pipeline '{spec}': {err}", "") from err
    rec = events.ACTIVE
    if rec is not None:
        with rec.span(f"pipeline {spec}", "lower", {"pipeline": spec, "source": source or ""}):
            return _run_steps(module, steps, ctx, verify, of, rec)
    return _run_steps(module, steps, ctx, verify, of, None)


def _run_steps(module: ModuleOp, steps: list, ctx: Context, verify: bool, of: str,
               rec: events.Recorder | None) -> ModuleOp:  # fmt: skip
    for spec_i, pass_i in steps:
        try:
            if rec is None:
                pass_i.apply(ctx, module)
            else:
                with rec.span(spec_i.name, "pass", {"pass": str(spec_i)}):
                    pass_i.apply(ctx, module)
        except Exception as err:  # re-raised with the pass named
            raise _pipeline_error(module, str(spec_i), err, of) from err
        if verify:
            try:
                module.verify()
            except Exception as err:
                raise PipelineError(
                    f"pass '{spec_i}' produced invalid IR{of}: {err}", spec_i.name
                ) from err
    return module


def _pipeline_error(module: ModuleOp, pass_spec: str, err: Exception, of: str) -> PipelineError:
    """Name the pass, save the IR it failed on and give the command that reproduces it."""
    msg = f"pass '{pass_spec}' failed{of}: {err}"
    try:
        text = str(module)
    except Exception:  # noqa: BLE001 - a half-rewritten module may not print: no repro
        return PipelineError(msg, pass_spec.split("{")[0])
    fd, path = tempfile.mkstemp(prefix="flow-repro-", suffix=".mlir")
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")
    repro = f"flow-opt {path} -p '{pass_spec}'"
    return PipelineError(f"{msg}\nrepro: {repro}", pass_spec.split("{")[0], repro)
