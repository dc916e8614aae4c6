"""`flow.utils.global_view.to_global` / `to_local` of whole state dicts and loading a state
dict saved under one distribution into a model under another (OneFlow's save/load cookbook), on
every rank. Every value is checked against numpy. Prints `rank R: N checks passed`."""

from __future__ import annotations

import numpy as np
from rank_checks import Checks

import flow
import flow.env
from flow.utils import global_view

rank, world = flow.env.get_rank(), flow.env.get_world_size()
check = Checks(rank)
B, S = flow.sbp.broadcast, flow.sbp.split
everyone = flow.placement("cpu", ranks=list(range(world)))

# The whole state, the same on every rank (a model built with a fixed seed).
weight = np.arange(6 * 4, dtype=np.float32).reshape(6, 4) / 7.0
bias = np.linspace(-1, 1, 6).astype(np.float32)
step = np.array([3], dtype=np.int64)


def pieces_of(ranks: list[int]) -> dict | None:
    """The state as the ranks of `ranks` hold it: each its rows of the weight (a local tensor
    is this rank's piece of the global one, as in OneFlow), the rest whole; None outside."""
    if rank not in ranks:
        return None
    rows = np.array_split(weight, len(ranks))[ranks.index(rank)]
    return {"model": {"weight": flow.tensor(rows), "bias": flow.tensor(bias)},
            "step": flow.tensor(step), "lr": 0.5, "names": ("weight", "bias")}  # fmt: skip


def choose(structure, tensor):
    """Split the weight along its rows, broadcast everything else (a per-tensor SBP)."""
    return S(0) if tensor is structure["model"]["weight"] else B


# 1. A whole nested structure made global; non-tensor leaves are kept as they are.
g = global_view.to_global(pieces_of(list(range(world))), placement=everyone, sbp=choose)
check(g["lr"] == 0.5 and g["names"] == ("weight", "bias"), "non-tensor leaves kept")
check(g["model"]["weight"].sbp == (S(0),) and g["step"].sbp == (B,), "per-tensor sbp")
check.close(g["model"]["weight"].numpy(), weight, "global weight value")
check.close(g["model"]["bias"].numpy(), bias, "global bias value")
check.close(g["step"].numpy(), step, "global int64 value")
local = global_view.to_local(g)
mine = np.array_split(weight, world)[rank]
check.close(local["model"]["weight"].numpy(), mine, "to_local gives this rank's rows")
check(not local["model"]["bias"].is_global, "to_local returns local tensors")
check(global_view.to_global(None, placement=everyone, sbp=B) is None, "None passes through")
again = global_view.to_global(g, sbp=lambda s, t: B)  # global in: boxed, placement kept
check(again["model"]["weight"].sbp == (B,), "global tensors are boxed to the new sbp")
check.close(again["model"]["weight"].to_local().numpy(), weight, "boxed to broadcast")

# 2. Pieces held by the first half of the ranks only; the others pass None.
half = list(range(max(1, world // 2)))
on_half = global_view.to_global(pieces_of(half), placement=flow.placement("cpu", ranks=half),
                                sbp=choose)  # fmt: skip
check(on_half["lr"] == 0.5, "ranks outside get the structure")
if rank not in half:
    check(on_half["model"]["weight"].to_local().numpy().size == 0, "outside: empty piece")
else:
    inside = np.array_split(weight, len(half))[rank]
    check.close(on_half["model"]["weight"].to_local().numpy(), inside, "inside: its piece")
check.close(on_half["model"]["weight"].numpy(), weight, "sub-placement whole value")
cols = ({"w": flow.tensor(np.array_split(weight, len(half), axis=1)[half.index(rank)]),
         "step": flow.tensor(step[0])} if rank in half else None)  # fmt: skip
by_cols = global_view.to_global(cols, placement=flow.placement("cpu", ranks=half),
                                sbp=lambda sd, t: B if t.ndim == 0 else S(1))  # fmt: skip
check.close(by_cols["w"].numpy(), weight, "S(1) on a sub-placement (outside: rank-2 pieces)")

# 3. load_state_dict boxes a differently distributed state into the model's distribution.
m = flow.nn.Linear(4, 6)
m.to_global(placement=everyone, sbp=B)
m.load_state_dict(g["model"])
check(m.weight.sbp == (B,) and m.weight.placement == everyone, "the model keeps its sbp")
check.close(m.weight.to_local().numpy(), weight, "loaded weight (from S(0))")
check.close(m.bias.to_local().numpy(), bias, "loaded bias (from S(0))")
m.load_state_dict({"weight": flow.tensor(weight * 2), "bias": flow.tensor(bias * 2)})
check.close(m.weight.to_local().numpy(), weight * 2, "loaded weight (from local)")
x = np.ones((2, 4), dtype=np.float32)
y = m(flow.tensor(x).to_global(placement=everyone, sbp=B))
check.close(y.numpy(), x @ (weight * 2).T + bias * 2, "the loaded model computes")
state = pieces_of(list(range(world)))

# 4. Bad input gets a clear error.
try:
    global_view.to_global(state, placement=everyone)
    check(False, "a local tensor without sbp must be refused")
except ValueError as e:
    check("needs both placement and sbp" in str(e), f"message: {e}")
try:
    global_view.to_global(state, placement="cpu", sbp=B)
    check(False, "a placement that is not a flow.placement must be refused")
except TypeError as e:
    check("flow.placement" in str(e), f"message: {e}")
# 5. OneFlow's rule for a local tensor made global: along a B axis every rank takes the first
# rank's data (the replicas agree even when the local tensors differ), along S its own.
mine = np.full((1, 2, 3), float(rank), dtype=np.float32)
b = flow.tensor(mine).to_global(placement=everyone, sbp=B)
check.close(b.to_local().numpy(), np.zeros((1, 2, 3)), "B: rank 0's data on every rank")
if world == 4:  # the 2-D SBP page: (B, S(0)) on [[0, 1], [2, 3]]
    mesh = flow.placement("cpu", ranks=[[0, 1], [2, 3]])
    bs = flow.tensor(mine).to_global(placement=mesh, sbp=(B, S(0)))
    check.close(bs.to_local().numpy(), np.full((1, 2, 3), float(rank % 2)), "(B, S(0)) piece")
    check.close(bs.numpy(), np.concatenate([np.zeros((1, 2, 3)), np.ones((1, 2, 3))]),
                "(B, S(0)) global value")  # fmt: skip
else:
    s0 = flow.tensor(mine).to_global(placement=everyone, sbp=S(0))
    check.close(s0.numpy(), np.arange(world, dtype=np.float32).repeat(6).reshape(world, 2, 3),
                "S(0): each rank's own piece")  # fmt: skip
    check(True, "(no 2-D mesh below 4 ranks)")

# 6. Unseeded local random tensors differ between ranks (OneFlow seeds each process itself);
# rank 0 draws what a single process draws; global random tensors and seeded draws agree.
def every_rank(t):
    return t.unsqueeze(0).to_global(placement=everyone, sbp=S(0)).numpy()


same_state = flow.Generator().set_state(flow.default_generator.get_state())
drawn = every_rank(flow.randn(5))
check.close(drawn[0], flow.randn(5, generator=same_state).numpy(), "rank 0: the default stream")
check(len({row.tobytes() for row in drawn}) == world, "unseeded local draws differ per rank")
glob = flow.randn(5, placement=everyone, sbp=B)
check(len({row.tobytes() for row in every_rank(glob.to_local())}) == 1, "global draws agree")
dropped = flow.nn.functional.dropout(flow.ones(4, 6, placement=everyone, sbp=S(1)), p=0.5)
check.close(every_rank(dropped.to_global(sbp=B).to_local())[0], dropped.numpy(),
            "unseeded dropout of a global tensor: one mask on every rank")  # fmt: skip
coins = flow.bernoulli(flow.full((16,), 0.5, placement=everyone, sbp=B)).to_local()
check(len({row.tobytes() for row in every_rank(coins)}) == 1, "global bernoulli agrees")
flow.manual_seed(7)
seeded = every_rank(flow.rand(5))
check(len({row.tobytes() for row in seeded}) == 1, "seeded local draws agree")
check.done()
