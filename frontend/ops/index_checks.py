"""Index range checks in compiled code: the IndexError eager kernels raise, raised after the call.

Eager kernels see index values and reject out-of-range ones; a traced program cannot, and
IREE's gathers clamp. So an index-consuming op, when traced, also emits a small reduction
over its index tensor (a *check site*): two 0-d integers, e.g. the position of the first
bad index in row-major order (its size when there is none) and that index's value. They
become extra results of the compiled function (frontend/_jit.py); the wrapper looks at them
after each call, before it returns results or writes back mutated tensors (parameters,
optimizer state), and raises the error eager mode would have raised at that site: same
class, same message, the user's source line recorded at trace time.

In a global program each rank computes the reduction over its shard, and SBP inference
combines the shards' results (they come out broadcast): every rank gets the same values,
so all ranks raise the same error after the same call, and none is left waiting.

`FLOW_CHECK_INDICES=0` (read when a program is traced) or `flow.jit(f, check_indices=False)`
turns the sites off.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from flow import primitives as P
from flow.core import dtypes as _dtypes
from flow.core.autograd import no_grad
from flow.core.errors import op_error, user_location
from flow.core.tensor import Tensor
from flow.core.trace import Trace, current_trace
from flow.ops import basic as O
from flow.primitives.registry import bind

Report = Callable[[int, int], Exception | None]


@dataclass(eq=False)
class IndexCheck:
    """One check site: its two result values and what they mean."""

    values: list  # two 0-d integer SSA values of the trace
    report: Report  # (a, b) from the program -> the error to raise, or None

    def error(self, a: np.ndarray, b: np.ndarray) -> Exception | None:
        return self.report(int(a.reshape(-1)[0]), int(b.reshape(-1)[0]))


def env_enabled() -> bool:
    """Whether `FLOW_CHECK_INDICES` leaves the checks on (the default)."""
    return os.environ.get("FLOW_CHECK_INDICES", "1").strip().lower() not in ("0", "false", "off")


def _active_trace() -> Trace | None:
    trace = current_trace()
    return trace if trace is not None and trace.check_indices else None


def _emit(trace: Trace, build: Callable[[], tuple[Tensor, Tensor]], report: Report) -> None:
    """Run `build` (emitting the site's ops) and register its two results on `trace`."""
    with no_grad():
        a, b = build()
    trace.index_checks.append(IndexCheck([a._value, b._value], report))


def _wide(idx: Tensor, bound: int) -> Tensor:
    """`idx` in a dtype holding `bound` and every index: its own when int32 or int64 (no
    cast: a widening cast of an index that its gather shares was read back zero-extended on
    lavapipe, see frontend/_movement.py `_index_dtype`), else int64."""
    if idx.dtype is _dtypes.int64 or (idx.dtype is _dtypes.int32 and abs(bound) < 2**31):
        return idx
    return O.to(idx, _dtypes.int64)


def _reduce(x: Tensor, kind: str) -> Tensor:
    """The 0-d min / max / sum of all of `x`, in its dtype."""
    return bind(P.reduce, O.reshape(x, x.numel()), kind=kind, dims=(0,))


def _first_bad(idx: Tensor, bad_of: Callable[[Tensor], Tensor]) -> tuple[Tensor, Tensor]:
    """(position of the first index where `bad_of` holds, or numel; the index there)."""
    n = idx.numel()
    flat = O.reshape(idx, n)
    at = bind(P.iota, dim=0, shape=(n,), dtype=_dtypes.int64)
    pos = _reduce(O.where(bad_of(flat), at, n), "min")
    val = _reduce(O.where(O.eq(at, pos), flat, O.zeros((), dtype=flat.dtype)), "sum")
    return pos, val


def _outside(flat: Tensor, lo: int, hi: int) -> Tensor:
    return bind(P.or_, O.lt(flat, lo), O.ge(flat, hi))


def check_bounds(op: str, index: Tensor, n: int, dim: int, *, negative_ok: bool) -> None:
    """In a trace: every index must lie in `[0, n)` (`[-n, n)` with `negative_ok`); the
    error is eager's "index V is out of bounds for dim D with size N"."""
    trace = _active_trace()
    if trace is None or index.numel() == 0:
        return
    lo, loc, count = (-n if negative_ok else 0), user_location(), index.numel()

    def report(pos: int, val: int) -> Exception | None:
        if pos >= count:
            return None
        return op_error(op, f"index {val} is out of bounds for dim {dim} with size {n}", loc,
                        cls=IndexError)  # fmt: skip

    _emit(trace, lambda: _first_bad(_wide(index, n), lambda f: _outside(f, lo, n)), report)


def check_targets(op: str, target: Tensor, classes: int, ignore_index: int) -> None:
    """In a trace: class-index targets must lie in `[0, classes)` unless `ignore_index`."""
    trace = _active_trace()
    if trace is None or target.numel() == 0:
        return
    loc, count = user_location(), target.numel()

    def bad_of(flat: Tensor) -> Tensor:
        return bind(P.and_, O.ne(flat, ignore_index), _outside(flat, 0, classes))

    def report(pos: int, val: int) -> Exception | None:
        if pos >= count:
            return None
        return op_error(op, f"target {val} is out of bounds for {classes} classes", loc,
                        cls=IndexError)  # fmt: skip

    bound = max(abs(ignore_index), classes)
    _emit(trace, lambda: _first_bad(_wide(target, bound), bad_of), report)


def check_classes(op: str, values: Tensor, num_classes: int) -> None:
    """In a trace: `one_hot`'s check, on the smallest and largest class value."""
    trace = _active_trace()
    if trace is None or values.numel() == 0:
        return
    loc = user_location()

    def build() -> tuple[Tensor, Tensor]:
        wide = _wide(values, num_classes)
        return _reduce(wide, "min"), _reduce(wide, "max")

    def report(lo: int, hi: int) -> Exception | None:
        if lo < 0:
            return op_error(op, f"class values must be non-negative, got {lo}", loc)
        if hi >= num_classes:
            return op_error(op, f"class values must be smaller than num_classes "
                                f"({num_classes}), got {hi}", loc)  # fmt: skip
        return None

    _emit(trace, build, report)


def first_error(checks: list[IndexCheck], values: list[np.ndarray]) -> Exception | None:
    """The error of the first failing site (in program order, as eager would raise)."""
    for k, check in enumerate(checks):
        err = check.error(values[2 * k], values[2 * k + 1])
        if err is not None:
            return err
    return None
