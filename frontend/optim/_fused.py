"""`foreach=True`: a traced optimizer step updates many parameters as one flat vector.

Inside a trace (`flow.jit`, `nn.Graph`), `Optimizer.step` groups the parameters of a param
group that have a gradient into buckets of one dtype, distribution and state layout,
concatenates each bucket's parameters, gradients and state tensors into flat vectors, runs
the optimizer's own `_update` once on them, and writes the pieces back into each parameter
and state tensor. The update is then one dispatch per bucket, whatever the number of
parameters. The math is the per-parameter math elementwise, so eager (per-parameter) and
compiled steps agree; the state keeps its per-parameter form, so `state_dict`, checkpoints
and the interpreter tier see no difference. IREE turns the concatenations and the pieces
into copies (`flow.tensor.update` / `flow.tensor.slice`), not dispatches.

A 0-d state entry (Adam's and RMSprop's `step`) is gathered into the flat vector by each
element's parameter number and read back from the first element of its parameter. Global
parameters that are not broadcast on every mesh axis (their splits would not line up with
a flat vector), state that is not such tensors, and buckets of one parameter take the
per-parameter path.
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod
from typing import Any

import numpy as np

from flow import primitives as P
from flow.core.tensor import Tensor
from flow.ops.basic import from_numpy
from flow.ops.movement import cat, narrow, split
from flow.primitives.registry import bind

__all__ = ["bucket_key", "fused_update"]

Update = Callable[[Tensor, Tensor, dict, dict, Any], None]


def bucket_key(p: Tensor, grad: Tensor, state: dict) -> tuple | None:
    """What parameters must share to be updated as one flat vector; None: update it alone."""
    dist = getattr(p, "_dist", None)
    if dist is not None and any(s.kind != "B" for s in dist.sbp):
        return None
    if grad.dtype is not p.dtype or tuple(grad.shape) != tuple(p.shape):
        return None
    if grad._trace is None and getattr(grad, "_dist", None) != dist:
        return None  # (a traced value's distribution is inferred after tracing)
    entries = []
    for key, value in state.items():
        if not isinstance(value, Tensor):
            return None
        if value.ndim and getattr(value, "_dist", None) != dist:
            return None
        if value.ndim != 0 and tuple(value.shape) != tuple(p.shape):
            return None
        entries.append((key, value.dtype))
    return (p.dtype, dist, tuple(entries))


def _flat(x: Tensor, n: int) -> Tensor:
    """`x` as a 1-D vector of `n` elements: its elements, or a 0-d value repeated."""
    return x.reshape(n) if x.ndim else x.reshape(1).expand(n)


class _Join:
    """Concatenates one tensor per parameter of a bucket into a flat vector."""

    def __init__(self, sizes: list[int]):
        self.sizes = sizes
        self._segments: Tensor | None = None

    def __call__(self, xs: list[Tensor]) -> Tensor:
        if all(x.ndim == 0 for x in xs) and any(n != 1 for n in self.sizes):
            # One value per parameter, gathered by segment: an elementwise read that IREE
            # fuses into the update's dispatch, where a broadcast per parameter would be a
            # dispatch of its own. The segments are in range: a plain gather, no checks.
            return bind(P.gather, cat([x.reshape(1) for x in xs], 0), self.segments(), dim=0)
        return cat([_flat(x, n) for x, n in zip(xs, self.sizes)], 0)

    def segments(self) -> Tensor:
        """Each flat element's parameter number (a constant input of the traced program)."""
        if self._segments is None:
            counts = np.asarray(self.sizes)
            self._segments = from_numpy(np.repeat(np.arange(len(counts), dtype=np.int32), counts))
        return self._segments


def fused_update(update: Update, params: list[Tensor], states: list[dict], group: dict,
                 lr) -> None:  # fmt: skip
    """Run `update` once on the concatenation of `params` (all of one bucket) and write the
    results back into each parameter and into each parameter's `states` entry."""
    sizes = [prod(p.shape) for p in params]
    join = _Join(sizes)
    flat_p = join(params)
    flat_g = join([p.grad for p in params])
    keys = list(states[0])
    flat_state = {k: join([s[k] for s in states]) for k in keys}
    update(flat_p, flat_g, flat_state, group, lr)
    for p, piece in zip(params, split(flat_p, sizes, 0)):
        p.copy_(piece.reshape(p.shape))
    for key, flat in flat_state.items():
        pieces = split(flat, sizes, 0)
        for p, state, piece in zip(params, states, pieces):
            old = state.get(key)
            if isinstance(old, Tensor) and old.ndim == 0 and p.ndim != 0:
                old.copy_(narrow(piece, 0, 0, 1).reshape(()))  # a per-parameter scalar
            elif isinstance(old, Tensor):
                old.copy_(piece.reshape(old.shape))
            else:  # made by this first step (SGD's first momentum buffer with dampening)
                state[key] = piece.reshape(p.shape)
