"""Run a traced flow program on the eager kernels: the tier a program runs on before IREE
has compiled it (compile/tiers.py).

Every op of a traced function was emitted by a primitive (`Trace.eqns` keeps which, with its
parameters), so the program runs as a list of kernel calls over numbered slots: the same
numpy kernels and result casts as eager mode, hence eager numerics, without the per-op
work of eager tensors (type inference, autograd records, device bookkeeping). A slot is
dropped after its last use, so an interpreted step holds no more intermediates than eager
mode would.

A global program runs on global values: each call gathers every global input's value from
the shards (the eager global-tensor code: `global_numpy`, collective over the world), runs
the ops on those values, where the ops that change a value's distribution only
(`flow.redistribute`, `flow.boxing`, `flow.to_global`) are identities, and gives each global
result as this rank's shard of its distribution (`slice_to`: a partial sum's value on the
first rank of its axis, zeros elsewhere; an empty shard outside its placement), which is
what the compiled per-rank program returns (`Program.call_flat`, after `absent_results`), up
to how a partial sum is split between ranks. Any other op no primitive emitted (a
`flow.to_local`, an explicit collective) makes the program uninterpretable: `Interpreter`
raises `NotInterpretable` and the program is compiled before it runs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from flow.core import dtypes as _dtypes
from flow.core import profiling

from .stages import Lowered

__all__ = ["Interpreter", "NotInterpretable"]


class NotInterpretable(Exception):
    """The program has an op that no primitive emitted (it names the op)."""


# Ops that change a value's distribution only: on global values, the identity.
_SAME_GLOBAL_VALUE = ("flow.redistribute", "flow.boxing", "flow.to_global")


class Interpreter:
    """`Interpreter(lowered)(*inputs)` → the program's results, as numpy arrays.

    Its inputs are those of the compiled function: the call's arrays, the captured tensors'
    values and the random keys, in the program's argument order; of a global program, this
    rank's shards, and its results are this rank's shards (see the module docstring)."""

    def __init__(self, lowered: Lowered):
        f = lowered.module.body.block.first_op
        block = f.body.block
        slots = {arg: i for i, arg in enumerate(block.args)}
        self.n_inputs = len(block.args)
        self.name = lowered.name
        steps: list[tuple[Callable, dict, tuple[int, ...], int, np.dtype]] = []
        last_use: dict[int, int] = {}
        results: tuple[int, ...] = ()
        tags: list[tuple[str, int] | None] = []  # a pipeline's (phase, micro-batch) per step
        for op in block.ops:
            if op.name == "func.return":
                results = tuple(slots[v] for v in op.operands)
                break
            if op.name in _SAME_GLOBAL_VALUE:
                slots[op.results[0]] = slots[op.operands[0]]
                continue
            eqn = lowered.eqns.get(op)
            if eqn is None or len(op.results) != 1:
                raise NotInterpretable(f"{lowered.name}: op {op.name} was not emitted by a "
                                       "primitive; the program runs compiled only")  # fmt: skip
            prim, params = eqn
            ins = tuple(slots[v] for v in op.operands)
            out = slots[op.results[0]] = len(slots)
            for i in ins:
                last_use[i] = len(steps)
            dtype = _dtypes.from_ir(op.results[0].type.element_type).np_dtype
            steps.append((prim.impl, params, ins, out, dtype))
            tags.append(_slot_tag(op))
        kept = set(results)
        # per step, the slots whose last use it is (never a result, never an input: the
        # caller's arrays are the caller's)
        self._free = [[] for _ in steps]
        for i, k in last_use.items():
            if i not in kept and i >= self.n_inputs:
                self._free[k].append(i)
        self._steps = steps
        self._slots = _slot_runs(tags)
        self._results = results
        self._n_slots = len(slots)
        self._global = None
        if lowered.is_global:  # per input and per result: (GlobalInfo or None, global shape)
            ins = [(lowered.arg_dists.get(i), tuple(a.type.get_shape()))
                   for i, a in enumerate(block.args)]  # fmt: skip
            types = f.function_type.outputs.data
            outs = [(info, tuple(ty.get_shape())) for info, ty in zip(lowered.out_dists, types)]
            self._global = (ins, outs)

    def __call__(self, *inputs) -> list[np.ndarray]:
        if len(inputs) != self.n_inputs:
            raise TypeError(f"interpreted program takes {self.n_inputs} inputs, got {len(inputs)}")
        rec = profiling.ACTIVE
        if rec is not None:
            with rec.span(f"interpret {self.name}", "interpret",
                          {"function": self.name, "ops": len(self._steps)}):  # fmt: skip
                return self._call(inputs)
        return self._call(inputs)

    def _call(self, inputs: tuple) -> list[np.ndarray]:
        if self._global is None:
            return self._run(inputs)
        from flow.distributed.boxing import slice_to
        from flow.distributed.global_tensor import global_numpy
        from flow.distributed.placement import make_global

        ins, outs = self._global
        values = [x if info is None else global_numpy(make_global(x, shape, info))
                  for x, (info, shape) in zip(inputs, ins)]  # fmt: skip
        return [v if info is None else np.asarray(slice_to(v, info.placement, info.sbp), order="C")
                for v, (info, _) in zip(self._run(values), outs)]  # fmt: skip

    def _run(self, inputs) -> list[np.ndarray]:
        """The program's results for its input values (global values of a global program)."""
        env: list = [*inputs, *([None] * (self._n_slots - self.n_inputs))]
        rec = profiling.ACTIVE
        with np.errstate(all="ignore"):  # IEEE results without warnings, as in eager mode
            if rec is None or not self._slots:
                self._run_steps(env, 0, len(self._steps))
            else:  # a pipeline's slots, one span per run of ops of one (phase, micro-batch)
                for lo, hi, (phase, mb) in self._slots:
                    name = phase if phase == "update" else f"{phase} {mb}"
                    with rec.span(name, "pipeline",
                                  {"phase": phase, "micro_batch": mb, "ops": hi - lo,
                                   "function": self.name, "tier": "interpreted"}):  # fmt: skip
                        self._run_steps(env, lo, hi)
        return [env[i] for i in self._results]

    def _run_steps(self, env: list, lo: int, hi: int) -> None:
        steps, frees = self._steps, self._free
        for k in range(lo, hi):
            impl, params, ins, out, dtype = steps[k]
            value = np.asarray(impl(*[env[i] for i in ins], **params))
            env[out] = value if value.dtype == dtype else value.astype(dtype)
            for i in frees[k]:
                env[i] = None


def _slot_tag(op) -> tuple[str, int] | None:
    """The pipeline slot (phase, micro-batch) the trace tagged `op` with, if any."""
    from flow.dialect.attr_names import MICRO_BATCH_ATTR, PHASE_ATTR

    phase = op.attributes.get(PHASE_ATTR)
    if phase is None:
        return None
    mb = op.attributes.get(MICRO_BATCH_ATTR)
    return (phase.data, mb.value.data if mb is not None else 0)


def _slot_runs(tags: list) -> list[tuple[int, int, tuple[str, int]]]:
    """Runs of consecutive steps of one slot, `(first, end, slot)`; untagged steps join the
    run before them (or the first one). Empty when nothing is tagged."""
    if not any(tags):
        return []
    runs: list[list] = []
    for k, tag in enumerate(tags):
        if runs and (tag is None or tag == runs[-1][2]):
            runs[-1][1] = k + 1
        else:
            runs.append([k, k + 1, tag or next(t for t in tags if t)])
    return [tuple(r) for r in runs]
