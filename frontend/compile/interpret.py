"""Run a traced flow program on the eager kernels: the tier a program runs on before IREE
has compiled it (compile/tiers.py).

Every op of a traced function was emitted by a primitive (`Trace.eqns` keeps which, with its
parameters), so the program runs as a list of kernel calls over numbered slots: the same
numpy kernels and result casts as eager mode, hence eager numerics, without the per-op
work of eager tensors (type inference, autograd records, device bookkeeping). A slot is
dropped after its last use, so an interpreted step holds no more intermediates than eager
mode would. An op no primitive emitted (e.g. a global program's `flow.redistribute`) makes
the program uninterpretable: `Interpreter` raises `NotInterpretable` and the program is
compiled before it runs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from flow.core import dtypes as _dtypes

from .stages import Lowered

__all__ = ["Interpreter", "NotInterpretable"]


class NotInterpretable(Exception):
    """The program has an op that no primitive emitted (it names the op)."""


class Interpreter:
    """`Interpreter(lowered)(*inputs)` → the program's results, as numpy arrays.

    Its inputs are those of the compiled function: the call's arrays, the captured tensors'
    values and the random keys, in the program's argument order."""

    def __init__(self, lowered: Lowered):
        f = lowered.module.body.block.first_op
        block = f.body.block
        slots = {arg: i for i, arg in enumerate(block.args)}
        self.n_inputs = len(block.args)
        steps: list[tuple[Callable, dict, tuple[int, ...], int, np.dtype]] = []
        last_use: dict[int, int] = {}
        results: tuple[int, ...] = ()
        for op in block.ops:
            if op.name == "func.return":
                results = tuple(slots[v] for v in op.operands)
                break
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
        kept = set(results)
        # per step, the slots whose last use it is (never a result, never an input: the
        # caller's arrays are the caller's)
        self._free = [[] for _ in steps]
        for i, k in last_use.items():
            if i not in kept and i >= self.n_inputs:
                self._free[k].append(i)
        self._steps = steps
        self._results = results
        self._n_slots = len(slots)

    def __call__(self, *inputs) -> list[np.ndarray]:
        if len(inputs) != self.n_inputs:
            raise TypeError(f"interpreted program takes {self.n_inputs} inputs, got {len(inputs)}")
        env: list = [*inputs, *([None] * (self._n_slots - self.n_inputs))]
        with np.errstate(all="ignore"):  # IEEE results without warnings, as in eager mode
            for (impl, params, ins, out, dtype), free in zip(self._steps, self._free):
                value = np.asarray(impl(*[env[i] for i in ins], **params))
                env[out] = value if value.dtype == dtype else value.astype(dtype)
                for i in free:
                    env[i] = None
        return [env[i] for i in self._results]
