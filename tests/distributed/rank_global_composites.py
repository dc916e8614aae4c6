"""Composite ops on eager global tensors, on every rank: ops that build local constants on
the way (interpolation matrices, index masks, random masks) take them as broadcast, and give
the values the same op gives on local tensors. A local random tensor that differs between
ranks is refused. Prints `rank R: N checks passed` at the end."""

from __future__ import annotations

import numpy as np
from rank_checks import Checks

import flow
import flow.env
import flow.nn.functional as F
from flow.distributed.placement import placement, sbp

rank, world = flow.env.get_rank(), flow.env.get_world_size()
pl = placement("cpu", list(range(world)))
check = Checks(rank)


rng = np.random.default_rng(0)
X4 = rng.standard_normal((4, 3, 5, 5)).astype(np.float32)
X2 = rng.standard_normal((6, 10)).astype(np.float32)


def g(a, nd):
    return flow.tensor(a).to_global(pl, sbp.broadcast).to_global(sbp=nd)


CASES = {
    "interpolate bilinear": (lambda t: F.interpolate(t, scale_factor=2, mode="bilinear"), X4),
    "interpolate bicubic": (lambda t: F.interpolate(t, size=(7, 9), mode="bicubic"), X4),
    "sort": (lambda t: flow.sort(t, dim=1)[0], X2),
    "topk": (lambda t: flow.topk(t, 3, dim=1)[0], X2),
    "cumsum": (lambda t: flow.cumsum(t, dim=1), X2),
    "argsort": (lambda t: flow.argsort(t, dim=1), X2),
}
for name, (fn, value) in CASES.items():
    want = fn(flow.tensor(value)).numpy()
    for nd in (sbp.split(0), sbp.broadcast):
        got = fn(g(value, nd))
        check(got.is_global, f"{name} under {nd}: global")
        check(np.allclose(got.numpy(), want, rtol=1e-5, atol=1e-5), f"{name} under {nd}: value")

# Dropout on a global tensor: the mask is drawn the same on every rank (same seed), so the
# global result equals the local one under that seed.
flow.manual_seed(7)
want = F.dropout(flow.tensor(X2), 0.5, training=True).numpy()
flow.manual_seed(7)
got = F.dropout(g(X2, sbp.split(0)), 0.5, training=True).numpy()
check(np.array_equal(got, want), "dropout of a global tensor equals dropout under the same seed")

# Ranks seeded differently draw different masks: refused, not silently inconsistent.
flow.manual_seed(100 + rank)
try:
    F.dropout(g(X2, sbp.split(0)), 0.5, training=True)
    check(world == 1, "a random mask that differs between ranks is refused")
except ValueError as err:
    check("differs between ranks" in str(err) and "manual_seed" in str(err), str(err))

check.done()
