"""Eager boxing of every pair of SBP entries, for every element type, on 1-D placements (2 or 3
ranks: even and uneven splits) and a 2x2 mesh (4 ranks), plus placement changes.

The reference is independent of flow's collectives: each rank's shard is cut from the global
value with numpy (balanced pieces, OneFlow's rule), partial sums are random integer addends,
and after boxing the global value is rebuilt from every rank's local shard with mpi4py's own
allgather. Values are small integers, exact in every element type (f16 and bf16 included).
Prints `rank R: N checks passed`."""

from __future__ import annotations

from itertools import product

import numpy as np
from mpi4py import MPI
from rank_checks import Checks

import flow
import flow.env
from flow.distributed.placement import placement, sbp

rank, world = flow.env.get_rank(), flow.env.get_world_size()
S, B, P = sbp.split, sbp.broadcast, sbp.partial_sum
check = Checks(rank)
DTYPES = [flow.float32, flow.float64, flow.float16, flow.bfloat16, flow.int32, flow.int64,
          flow.int8, flow.bool]  # fmt: skip


def piece(n: int, k: int, i: int) -> slice:
    """The `i`-th of `k` balanced pieces of `n`: n // k each, one more for the first n % k."""
    base, rem = divmod(n, k)
    start = i * base + min(i, rem)
    return slice(start, start + base + (1 if i < rem else 0))


def coord_of(pl: placement, r: int) -> tuple[int, ...]:
    return tuple(int(c) for c in np.argwhere(np.array(pl.ranks) == r)[0])


def region(shape, pl: placement, nd, c) -> tuple[slice, ...]:
    """Where the shard of the rank at mesh coordinate `c` lies in the global value."""
    idx = [slice(0, n) for n in shape]
    for k, s, ci in zip(pl.hierarchy, nd, c):
        if s not in (B, P):
            d = s.sbp.dim
            sub = piece(idx[d].stop - idx[d].start, k, ci)
            idx[d] = slice(idx[d].start + sub.start, idx[d].start + sub.stop)
    return tuple(idx)


def shard(value: np.ndarray, pl: placement, nd, seed: int) -> np.ndarray:
    """This rank's shard of `value` under `nd`; a P axis gives random integer addends."""
    x = value
    for a, (k, s, c) in enumerate(zip(pl.hierarchy, nd, coord_of(pl, rank))):
        if s == P:
            rng = np.random.default_rng((seed, a))
            parts = [rng.integers(-3, 4, x.shape) for _ in range(k - 1)]
            x = parts[c] if c < k - 1 else x - sum(parts)
        elif s != B:
            idx = [slice(None)] * x.ndim
            idx[s.sbp.dim] = piece(x.shape[s.sbp.dim], k, c)
            x = x[tuple(idx)]
    return x


def rebuild(local: np.ndarray, shape, pl: placement, nd) -> np.ndarray:
    """The global value from every rank's shard (mpi4py): shards placed by their S axes, summed
    over the P axes, one replica per B axis."""
    every = MPI.COMM_WORLD.allgather(np.asarray(local, np.float64))
    out = np.zeros(shape)
    for r in pl.ranks if isinstance(pl.ranks[0], int) else [x for row in pl.ranks for x in row]:
        c = coord_of(pl, r)
        if all(ci == 0 for ci, s in zip(c, nd) if s == B):
            out[region(shape, pl, nd, c)] += every[r]
    return out


def entries(ndim: int):
    return [B, P, *(S(d) for d in range(ndim))]


def check_pair(pl: placement, src, dst, dt, shape, seed: int) -> None:
    rng = np.random.default_rng(seed)
    kinds = {s for s in (*src, *dst) if s == P}
    lo = 0 if dt == flow.bool else -8
    value = rng.integers(lo, 2 if dt == flow.bool else 9, shape)
    if dt == flow.bool and kinds:
        return  # partial sums of booleans are not defined
    base = shard(value, pl, src, seed)
    t = flow.tensor(base.astype(np.float64)).to(dt).to_global(pl, src)
    y = t.to_global(sbp=dst)
    what = f"{pl.hierarchy} {dt} {list(shape)} {src} -> {dst}"
    local = y.to_local().numpy()
    check(y.dtype == dt and local.dtype == t.to_local().numpy().dtype, f"{what}: dtype {y.dtype}")
    if all(s != P for s in dst):
        want = value[region(shape, pl, dst, coord_of(pl, rank))]
        check(local.shape == want.shape, f"{what}: shard shape {local.shape}, want {want.shape}")
        check(np.array_equal(local.astype(np.float64), want), f"{what}: shard {local} != {want}")
    got = rebuild(local.astype(np.float64), shape, pl, dst)
    check(np.array_equal(got, value), f"{what}: global value {got} != {value}")


seed = 0
pl = placement("cpu", list(range(world)))
for dt, shape in product(DTYPES, [(5, 3), (2, 7)]):
    for src, dst in product(entries(2), repeat=2):
        seed += 1
        check_pair(pl, (src,), (dst,), dt, shape, seed)

if world == 4:
    mesh = placement("cpu", [[0, 1], [2, 3]])
    for dt in (flow.float32, flow.bfloat16, flow.int64):
        for src, dst in product(product(entries(2), repeat=2), repeat=2):
            seed += 1
            check_pair(mesh, src, dst, dt, (5, 3), seed)

# Placement changes: to fewer ranks, to other ranks, to more ranks.
for dt in (flow.float32, flow.float16, flow.int32):
    value = np.arange(15).reshape(5, 3)
    src_pl = placement("cpu", list(range(world)))
    for ranks, nd in (([world - 1], (B,)), ([0], (S(1),)), (list(range(world)), (S(0),))):
        start = placement("cpu", [0]) if ranks == list(range(world)) else src_pl
        t = flow.tensor(value.astype(np.float64)).to(dt).to_global(start, B)
        if start == src_pl:
            t = t.to_global(sbp=S(0))
        dst_pl = placement("cpu", ranks)
        y = t.to_global(dst_pl, nd)
        what = f"placement {start.ranks} -> {ranks} {dt}"
        check(y.dtype == dt, f"{what}: dtype {y.dtype}")
        if rank in ranks:
            want = value[region(value.shape, dst_pl, nd, coord_of(dst_pl, rank))]
            check(np.array_equal(y.to_local().numpy().astype(np.int64), want), what)
        else:
            check(y.to_local().numpy().size == 0, f"{what}: a rank outside holds no data")
        check(np.array_equal(y.numpy().astype(np.int64), value), f"{what}: global value")

check.done()
