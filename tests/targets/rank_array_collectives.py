"""A rank of test_array_collectives.py: flow.targets.collectives' eager API on numpy arrays.

Every rank makes every rank's input from one seed, so numpy computes each expected result
on its own (the reference); the collectives must agree with it. Prints
`rank R: N checks passed`. Mode `hang`: rank 1 stays away from rank 0's second all_reduce,
which the watchdog must bound (FLOW_COLLECTIVE_TIMEOUT=3).
"""

from __future__ import annotations

import os
import sys
import time

import ml_dtypes
import numpy as np

from flow.targets import collectives, groups

MODE = sys.argv[1] if len(sys.argv) > 1 else "check"
if MODE == "hang":
    os.environ["FLOW_COLLECTIVE_TIMEOUT"] = "3"

from flow import env  # noqa: E402  (after the knob: MPI starts here)

RANK, WORLD = env.get_rank(), env.get_world_size()
ALL = tuple(range(WORLD))
count = 0


def check(ok: bool, what: str) -> None:
    global count
    if not ok:
        raise AssertionError(f"rank {RANK}: {what}")
    count += 1


def same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    got = np.asarray(got)
    check(got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}")
    check(got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}")
    check(np.array_equal(got, want), f"{what}: {got} != {want}")


def inputs(shape_of, dtype=np.float32, seed=0) -> list[np.ndarray]:
    """Every rank's input: rank r's has shape `shape_of(r)` (small integers: exact sums)."""
    out = []
    for r in ALL:
        gen = np.random.default_rng([seed, r])
        out.append(gen.integers(-4, 5, size=shape_of(r)).astype(dtype))
    return out


def pieces(n: int, k: int) -> list[tuple[int, int]]:
    """(start, size) of OneFlow's balanced split of n into k."""
    sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
    return [(sum(sizes[:i]), s) for i, s in enumerate(sizes)]


if MODE == "hang":
    collectives.all_reduce(np.ones(3, np.float32), ALL)  # both ranks: makes the communicator
    if RANK == 1:
        time.sleep(30)  # rank 0 waits for it in the next all_reduce
    collectives.all_reduce(np.ones(3, np.float32), ALL)
    print(f"rank {RANK} was not stopped", flush=True)
    sys.exit(0)

# all_reduce: every op, a 0-d array, f16 and bf16 (accumulated in f32), ints.
xs = inputs(lambda r: (3, 4))
same(collectives.all_reduce(xs[RANK], ALL), np.sum(xs, axis=0), "all_reduce sum")
same(collectives.all_reduce(xs[RANK], ALL, "max"), np.max(xs, axis=0), "all_reduce max")
same(collectives.all_reduce(xs[RANK], None, "min"), np.min(xs, axis=0), "all_reduce min, world")
ints = inputs(lambda r: (5,), np.int32, seed=1)
same(collectives.all_reduce(ints[RANK], ALL, "prod"), np.prod(ints, axis=0).astype(np.int32),
     "all_reduce prod int32")  # fmt: skip
scalars = [np.asarray(float(r + 1), np.float64) for r in ALL]
same(collectives.all_reduce(scalars[RANK], ALL), np.asarray(float(sum(range(1, WORLD + 1)))),
     "all_reduce of a 0-d array")  # fmt: skip
for half in (np.float16, ml_dtypes.bfloat16):
    hs = inputs(lambda r: (2, 3), half, seed=2)
    want = np.sum([h.astype(np.float32) for h in hs], axis=0).astype(half)
    same(collectives.all_reduce(hs[RANK], ALL), want, f"all_reduce {np.dtype(half).name}")

# reduce_scatter: an uneven dim, not the first.
ys = inputs(lambda r: (2, 5, 3), seed=3)
start, size = pieces(5, WORLD)[RANK]
same(collectives.reduce_scatter(ys[RANK], ALL, dim=1),
     np.sum(ys, axis=0)[:, start : start + size], "reduce_scatter dim 1")  # fmt: skip
start, size = pieces(3, WORLD)[RANK]
same(collectives.reduce_scatter(ys[RANK], ALL, dim=-1, op="max"),
     np.max(ys, axis=0)[..., start : start + size], "reduce_scatter max, dim -1")  # fmt: skip

# all_gather: members' sizes along the dim differ; bool and bf16 move as bytes.
for dtype in (np.float32, np.bool_, ml_dtypes.bfloat16, np.int64):
    gs = inputs(lambda r: (2, r + 1, 3), dtype, seed=4)
    same(collectives.all_gather(gs[RANK], ALL, dim=1), np.concatenate(gs, axis=1),
         f"all_gather dim 1 {np.dtype(dtype).name}")  # fmt: skip
zs = inputs(lambda r: (r % 2, 4), seed=5)  # some members hold no rows
same(collectives.all_gather(zs[RANK], ALL), np.concatenate(zs), "all_gather of empty pieces")

# all_to_all: S(0) -> S(1) with uneven pieces on both dims (members hold different rows).
ts = inputs(lambda r: (pieces(5, WORLD)[r][1], 7), seed=6)
whole = np.concatenate(ts, axis=0)
start, size = pieces(7, WORLD)[RANK]
same(collectives.all_to_all(ts[RANK], ALL, split_dim=1, concat_dim=0),
     whole[:, start : start + size], "all_to_all S(0) -> S(1)")  # fmt: skip
us = inputs(lambda r: (3, 4, pieces(6, WORLD)[r][1]), np.int16, seed=7)
whole = np.concatenate(us, axis=2)
start, size = pieces(3, WORLD)[RANK]
same(collectives.all_to_all(us[RANK], ALL, split_dim=0, concat_dim=2),
     whole[start : start + size], "all_to_all S(2) -> S(0), 3-d int16")  # fmt: skip

# broadcast: the others know nothing of the root's array.
root = WORLD - 1
value = inputs(lambda r: (2, 3, 2), np.float64, seed=8)[root]
same(collectives.broadcast(value if RANK == root else None, root), value, "broadcast, world")
same(collectives.broadcast(value if RANK == root else None, root, ALL), value, "broadcast")

# Python objects, and point to point between world ranks.
got = collectives.all_gather_object((RANK, f"r{RANK}"))
check(got == [(r, f"r{r}") for r in ALL], f"all_gather_object: {got}")
if RANK == 0:
    pending = [collectives.send(inputs(lambda r: (r + 2,), seed=9)[p], p, tag=5)
               for p in ALL[1:]]  # fmt: skip
    for p in pending:
        p.wait()
    same(collectives.recv(1, tag=6), np.arange(4) * 1, "recv from rank 1")
else:
    same(collectives.recv(0, tag=5), inputs(lambda r: (r + 2,), seed=9)[RANK], "recv from rank 0")
    if RANK == 1:
        collectives.send(np.arange(4), 0, tag=6).wait()

# A subgroup, its members in another order than the world's: member i is ranks[i].
if WORLD >= 3:
    sub = (2, 0)
    if RANK in sub:
        vs = inputs(lambda r: (r + 1, 2), seed=10)
        same(collectives.all_gather(vs[RANK], sub), np.concatenate([vs[2], vs[0]]),
             "all_gather in member order")  # fmt: skip
        same(collectives.all_reduce(vs[RANK][:1], sub), vs[2][:1] + vs[0][:1], "subgroup sum")

# One communicator per group of ranks: a compiled program's group table shares it.
(gid,) = collectives.program_groups([ALL])
check(groups.by_id(gid) is groups.communicator(ALL), "program group and eager group share")

# Bad input names what is wrong.
for call, message in [
    (lambda: collectives.all_reduce(xs[RANK], ALL, "mean"), "unknown reduction 'mean'"),
    (lambda: collectives.all_gather(xs[RANK], ALL, dim=2), "dim 2 is out of range"),
    (lambda: collectives.all_to_all(xs[RANK], ALL, 1, 1), "must differ"),
    (lambda: collectives.broadcast(xs[RANK], WORLD + 3), "is not a member"),
]:
    try:
        call()
    except ValueError as err:
        check(message in str(err), f"error {err!r} should say {message!r}")
    else:
        check(False, f"expected a ValueError saying {message!r}")

sys.stdout.write(f"rank {RANK}: {count} checks passed\n")
sys.stdout.flush()
