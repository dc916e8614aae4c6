"""Static memory accounting of a program: argument, output and temporary bytes, and the peak.

    analysis = memory_analysis(f)          # a func.func of flow (or lowered) ops
    analysis.peak_live_bytes               # the most bytes of tensors alive at once

The figures of JAX's `compiled.memory_analysis()`, estimated from the program's tensor types
when its ops run in block order (the order the pipeline schedule fixes for a pipeline stage):

* the arguments are alive for the whole call: the caller holds them (parameters, optimizer
  state, the batch), and an in-place update writes its new value into a fresh result buffer
  that replaces the argument only after the call;
* a value an op makes is alive from that op to its last use (a use inside a nested region
  counts at the op holding the region); results of the function live to the end;
* a value is its tensor type's bytes (`flow.dialect.sbp.tensor_bytes`); values that are not
  tensors, and tensors with dynamic dims, count 0;
* an op whose lowering allocates temporaries of its own counts them while it runs: a
  convolution lowered as a product of patches, its patches and their packed copy
  (`conv_workspace_bytes`).

`peak_live_bytes` is the estimate of the program's peak memory: the arguments plus the most
bytes of computed values alive at once. Run it on the program after the flow-level passes of
the hand-off (fusion: the values inside a `flow.fused` region never reach memory) and, for a
global program, after partitioning and scheduling (`handoff_memory_analysis`).

What it leaves out, measured against IREE's allocator peak on the `local-sync` cpu driver
(docs/architecture.md, section 1.4, has the figures): copies IREE makes that flow's program
does not show (data tiling packs matmul operands into tiled layouts), temporaries that IREE's
transient slab keeps together when the op order would not (its dispatches run in concurrent
waves), allocation alignment, and IREE's caching pool, which keeps freed buffers for reuse;
a reshape counts as a copy. The estimate is a figure per program, the allocator's peak the
whole process's.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue

from flow.dialect.sbp import tensor_bytes
from flow.dialect.window import ConvOp

from ._window import conv_workspace_bytes

__all__ = ["MemoryAnalysis", "flow_level_steps", "handoff_memory_analysis", "memory_analysis",
           "peak_live_bytes", "value_bytes"]

_NOT_FLOW_LEVEL = ("flow-lower-to-linalg",)  # the steps after which ops are no longer flow's


@dataclass(frozen=True)
class MemoryAnalysis:
    """The static memory figures of one program (per rank for a global one), in bytes.

    * `argument_size_in_bytes`: the program's inputs (parameters, optimizer state, batch,
      captured tensors, random keys; of a global program this rank's shards).
    * `output_size_in_bytes`: its results (user results, the new values of in-place updated
      parameters and state, index-check values).
    * `alias_size_in_bytes`: bytes of outputs that share an argument's buffer. Always 0 in
      flow: no argument is donated; an in-place update (a parameter, optimizer state) is a
      fresh result buffer that replaces the argument after the call, so during the call
      both are alive and the peak counts both.
    * `temp_size_in_bytes`: the most bytes of intermediate values (neither arguments nor
      results) alive at once.
    * `peak_live_bytes`: the estimate of peak memory: the arguments plus the most bytes of
      computed values (intermediates and results) alive at once.
    """

    argument_size_in_bytes: int
    output_size_in_bytes: int
    alias_size_in_bytes: int
    temp_size_in_bytes: int
    peak_live_bytes: int

    def __str__(self) -> str:
        rows = [("arguments", self.argument_size_in_bytes),
                ("outputs", self.output_size_in_bytes),
                ("aliased", self.alias_size_in_bytes),
                ("temporaries", self.temp_size_in_bytes),
                ("peak live", self.peak_live_bytes)]  # fmt: skip
        return "\n".join(f"{name:>12}: {_human(n):>10} ({n} bytes)" for name, n in rows)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v}" for k, v in self.__dict__.items())
        return f"MemoryAnalysis({fields})"


def _human(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def value_bytes(v: SSAValue) -> int:
    """The bytes of a tensor value (0 for other values and for tensors with dynamic dims)."""
    ty = v.type
    if not isinstance(ty, TensorType) or any(int(d) < 0 for d in ty.get_shape()):
        return 0
    return tensor_bytes(ty)


def memory_analysis(f: func.FuncOp) -> MemoryAnalysis:
    """The memory figures of `f` when its ops run in block order (see the module docstring)."""
    block = f.body.block
    ops = list(block.ops)
    last_use: dict[SSAValue, int] = {}
    for i, op in enumerate(ops):
        for inner in op.walk():  # uses inside regions count at the op holding them
            for o in inner.operands:
                last_use[o] = i
    returned: set[SSAValue] = set()
    outputs = 0
    if ops and isinstance(ops[-1], func.ReturnOp):
        returned = set(ops[-1].operands)
        outputs = sum(value_bytes(o) for o in ops[-1].operands)
    arguments = sum(value_bytes(a) for a in block.args)
    live = temp = peak = temp_peak = 0
    dies: dict[int, tuple[int, int]] = {}  # op index -> (bytes, of which temporaries)
    for i, op in enumerate(ops):
        for r in op.results:
            n = value_bytes(r)
            is_temp = r not in returned
            live += n
            temp += n if is_temp else 0
            end = last_use.get(r, i)
            total, temps = dies.get(end, (0, 0))
            dies[end] = (total + n, temps + (n if is_temp else 0))
        own = _workspace(op)
        peak, temp_peak = max(peak, live + own), max(temp_peak, temp + own)
        total, temps = dies.pop(i, (0, 0))
        live, temp = live - total, temp - temps
    return MemoryAnalysis(argument_size_in_bytes=arguments, output_size_in_bytes=outputs,
                          alias_size_in_bytes=0, temp_size_in_bytes=temp_peak,
                          peak_live_bytes=arguments + peak)  # fmt: skip


def _workspace(op: Operation) -> int:
    """The temporaries `op`'s own lowering allocates while it runs (see the module doc)."""
    if isinstance(op, ConvOp):
        return conv_workspace_bytes(op)
    return 0


def peak_live_bytes(f: func.FuncOp) -> int:
    """The most bytes of tensor values alive at once when `f`'s ops run in block order, its
    arguments alive throughout (`memory_analysis(f).peak_live_bytes`)."""
    return memory_analysis(f).peak_live_bytes


def flow_level_steps(spec: str) -> str:
    """The steps of the pipeline `spec` (a hand-off pipeline) that still leave flow ops: all
    but the lowering to linalg, after which every value of a fused region is explicit."""
    from ._registry import expand_pipeline

    return ",".join(str(s) for s in expand_pipeline(spec) if s.name not in _NOT_FLOW_LEVEL)


def handoff_memory_analysis(module: ModuleOp, spec: str, function: str | None = None
                            ) -> MemoryAnalysis:  # fmt: skip
    """The memory figures of `module`'s function `function` (default: the first) after the
    flow-level steps of the hand-off pipeline `spec` (partitioning and scheduling included,
    for a per-rank pipeline). `module` is left unchanged."""
    from ._handoff import run_pipeline

    work = run_pipeline(module.clone(), flow_level_steps(spec))
    for op in work.body.block.ops:
        if isinstance(op, func.FuncOp) and op.body.blocks.first is not None:
            if function is None or op.sym_name.data == function:
                return memory_analysis(op)
    raise ValueError(f"no function {function!r} with a body in the module")

