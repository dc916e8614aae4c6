"""Eager global tensors on every rank: boxing transitions of OneFlow's table (1-D, incl. uneven
splits, and a 2x2 mesh on 4 ranks), placement changes, global ops against numpy, creation ops and
the error messages. Prints `rank R: N checks passed` and a digest of the random tensors."""

from __future__ import annotations

import functools
import hashlib
import sys
from itertools import product

import numpy as np
from rank_checks import Checks

import flow
import flow.env
from flow.distributed.placement import placement, sbp

rank, world = flow.env.get_rank(), flow.env.get_world_size()
S, B, P = sbp.split, sbp.broadcast, sbp.partial_sum
check = Checks(rank)
close = functools.partial(check.close, shapes=False)


def piece(n: int, k: int, i: int) -> slice:
    base, rem = divmod(n, k)
    start = i * base + min(i, rem)
    return slice(start, start + base + (1 if i < rem else 0))


def expected_shard(value: np.ndarray, pl: placement, nd) -> np.ndarray | None:
    """This rank's shard under nd-SBP `nd` (None when a partial sum makes it arbitrary)."""
    coord = np.argwhere(np.array(pl.ranks) == rank)[0]
    x = value
    for k, s, c in zip(pl.hierarchy, nd, coord):
        if s == P:
            return None
        if s != B:
            idx = [slice(None)] * x.ndim
            idx[s.sbp.dim] = piece(x.shape[s.sbp.dim], k, c)
            x = x[tuple(idx)]
    return x


def make(value: np.ndarray, pl: placement, nd) -> flow.Tensor:
    return flow.tensor(value).to_global(pl, [B] * len(pl.hierarchy)).to_global(sbp=nd)


# ----------------------------------------------------------------- 1-D boxing, all transitions
G = np.arange(5 * 3, dtype=np.float32).reshape(5, 3) + 1  # 5 rows: uneven on 2 and 4 ranks
pl = placement("cpu", list(range(world)))
kinds = [S(0), S(1), B, P]
for src, dst in product(kinds, kinds):
    x = make(G, pl, [src])
    y = x.to_global(sbp=dst)
    check(y.sbp == (dst,) and tuple(y.shape) == G.shape, f"{src}->{dst} metadata")
    want = expected_shard(G, pl, [dst])
    if want is not None:
        close(y.to_local().numpy(), want, f"{src}->{dst} shard")
    close(y.numpy(), G, f"{src}->{dst} numpy")

# local -> global: shards (uneven), replicas, addends
mine = G[piece(5, world, rank)]
close(flow.tensor(mine).to_global(pl, S(0)).numpy(), G, "local S(0) -> global")
check(tuple(flow.tensor(mine).to_global(pl, S(0)).shape) == (5, 3), "local S(0) global shape")
close(flow.tensor(G).to_global(pl, B).numpy(), G, "local B -> global")
close(flow.tensor(G * (rank + 1)).to_global(pl, P).numpy(),
      G * sum(range(1, world + 1)), "local P -> global")  # fmt: skip

# placement changes: one rank -> all ranks and back, reversed rank order
one = placement("cpu", [0])
x = make(G, one, [B]).to_global(placement=pl, sbp=S(0))
close(x.numpy(), G, "[0] B -> all S(0)")
close(x.to_local().numpy(), G[piece(5, world, rank)], "[0] B -> all S(0) shard")
z = x.to_global(placement=placement("cpu", [world - 1]), sbp=B)
close(z.numpy(), G, "all S(0) -> [last] B")
check(z.to_local().numpy().size == (G.size if rank == world - 1 else 0), "[last] shard sizes")
rev = placement("cpu", list(reversed(range(world))))
close(make(G, pl, [P]).to_global(placement=rev, sbp=S(1)).numpy(), G, "P -> reversed S(1)")

# ----------------------------------------------------------------- 2-D placement (4 ranks)
if world == 4:
    mesh = placement("cpu", [[0, 1], [2, 3]])
    H = np.arange(7 * 6, dtype=np.float32).reshape(7, 6)
    nds = [(S(0), S(1)), (S(0), S(0)), (B, S(0)), (P, B), (S(1), P), (B, B), (P, P), (S(1), S(0))]
    for src, dst in product(nds, nds):
        y = make(H, mesh, src).to_global(sbp=dst)
        want = expected_shard(H, mesh, dst)
        if want is not None:
            close(y.to_local().numpy(), want, f"2-D {src}->{dst} shard")
        close(y.numpy(), H, f"2-D {src}->{dst} numpy")
    a = make(H, mesh, (S(0), B))
    b = make(H.T.copy(), mesh, (B, S(1)))
    close((a @ b).numpy(), H @ H.T, "2-D matmul")
    close((a + 1).sum(1).numpy(), (H + 1).sum(1), "2-D elementwise + reduce")

# ----------------------------------------------------------------- global ops vs numpy
A = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)
Bm = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
for sa, sb, out in [(S(0), B, S(0)), (B, S(1), S(1)), (S(1), S(0), P), (B, B, B), (P, B, P),
                    (B, P, P)]:  # fmt: skip
    r = make(A, pl, [sa]) @ make(Bm, pl, [sb])
    check(r.sbp == (out,), f"matmul {sa} x {sb} -> {r.sbp}, expected {out}")
    close(r.numpy(), A @ Bm, f"matmul {sa} x {sb}")
for sa, sb in product([S(0), S(1), B, P], repeat=2):
    x, y = make(A, pl, [sa]), make(A * 2 - 1, pl, [sb])
    close((x + y).numpy(), A + (A * 2 - 1), f"add {sa} {sb}")
    close((x * y).numpy(), A * (A * 2 - 1), f"mul {sa} {sb}")
    close((x * 3.0 - 1).numpy(), A * 3.0 - 1, f"scalar ops {sa}")
for s in [S(0), S(1), B, P]:
    x = make(A, pl, [s])
    close(x.sum(0).numpy(), A.sum(0), f"sum(0) of {s}")
    close(x.sum().numpy(), A.sum(), f"sum() of {s}")
    close(flow.exp(x).numpy(), np.exp(A), f"exp of {s}")
    close(x.amax(1).numpy() if hasattr(x, "amax") else x.max(1)[0].numpy(), A.max(1),
          f"max(1) of {s}")  # fmt: skip
    close(x.reshape(30).numpy(), A.reshape(30), f"reshape of {s}")
    close(x.T.numpy(), A.T, f"transpose of {s}")

# ----------------------------------------------------------------- creation ops
digests = []
for s in [S(0), S(1), B]:
    flow.manual_seed(123)
    r = flow.randn(5, 3, placement=pl, sbp=s)
    u = flow.rand(5, 3, placement=pl, sbp=s)
    v = r.numpy()
    digests.append(hashlib.sha1(v.tobytes() + u.numpy().tobytes()).hexdigest()[:16])
    close(flow.zeros(5, 3, placement=pl, sbp=s).numpy(), np.zeros((5, 3)), f"zeros {s}")
    close(flow.ones(5, 3, placement=pl, sbp=s).numpy(), np.ones((5, 3)), f"ones {s}")
    close(flow.full((5, 3), 2.5, placement=pl, sbp=s).numpy(), np.full((5, 3), 2.5), f"full {s}")
    close(flow.arange(7, placement=pl, sbp=S(0)).numpy(), np.arange(7), f"arange {s}")
    r_like = [flow.zeros_like(r), flow.ones_like(r, dtype=flow.int32), flow.full_like(r, 2.5)]
    for t, want in zip(r_like, [np.zeros((5, 3)), np.ones((5, 3)), np.full((5, 3), 2.5)]):
        check(t.is_global and t.placement == pl and t.sbp == r.sbp, f"*_like {s} keeps {s}")
        check(t.to_local().shape == r.to_local().shape, f"*_like {s}: the shard's shape")
        close(t.numpy(), want, f"*_like {s}")
check(len(set(digests)) == 1, f"random values differ across SBPs: {digests}")


# ----------------------------------------------------------------- errors
def raises(fn, *needles: str) -> None:
    try:
        fn()
    except (ValueError, TypeError, RuntimeError) as err:
        msg = str(err)
        check(all(n in msg for n in needles), f"message {msg!r} lacks {needles}")
        return
    check(False, f"no error for {needles}")


g0 = make(A, pl, [S(0)])
if world > 1:
    other = make(A, one, [B])
    raises(lambda: g0 + other, "one placement", "ranks=[0]", "split(dim=0)", "broadcast")
raises(lambda: g0 + flow.tensor(A), "global", "local tensor of shape [6, 5]")
raises(lambda: placement("cpu", list(range(world + 1))), f"[{world}]", "outside the world")
raises(lambda: flow.tensor(A).to_global(pl, S(2)), "split dim 2", "rank 2")
raises(lambda: g0.to_global(sbp=S(5)), "split dim 5")
if world > 1:
    raises(lambda: flow.tensor(A[: rank + 1]).to_global(pl, B), "not the shards")

if world == 1:
    check("mpi4py" not in sys.modules, "a world of one must not import MPI")
flow.env.barrier()
check.done(f" random={digests[0]}")
