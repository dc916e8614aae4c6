"""Global checkpoints on every rank (OneFlow's distributed save/load): `global_dst_rank` saves
global tensors whole from one rank, `global_src_rank` reads on one rank and hands every rank
global tensors placed there; per-rank shards saved with `to_local()`; errors reach every rank.
Prints `rank R: N checks passed`. Argument: a directory every rank can reach."""

from __future__ import annotations

import os
import sys

import numpy as np
from rank_checks import Checks

import flow
import flow.env
import flow.nn as nn
from flow.distributed.placement import placement, sbp

rank, world = flow.env.get_rank(), flow.env.get_world_size()
check = Checks(rank)
root = sys.argv[1]
everywhere = placement("cpu", list(range(world)))
W = np.arange(24, dtype=np.float32).reshape(6, 4) / 10
B = np.linspace(-1, 1, 6).astype(np.float32)


def split_rows(a: np.ndarray) -> np.ndarray:
    return np.array_split(a, world)[rank]


model = nn.Linear(4, 6)
model.load_state_dict({"weight": flow.tensor(W), "bias": flow.tensor(B)})
model.to_global(everywhere, sbp.split(0))
check.close(model.weight.to_local().numpy(), split_rows(W), "the weight is split by rows")

# save: global tensors gathered to rank 0, which alone writes
path = os.path.join(root, "global_ckpt")
state = {"model": model.state_dict(), "step": 3, "arr": np.arange(3, dtype=np.int16)}
flow.save(state, path, global_dst_rank=0)
# load: rank 0 reads, every rank gets global tensors on rank 0 (broadcast)
got = flow.load(path, global_src_rank=0)
w = got["model"]["weight"]
check(w.is_global and w.placement == placement("cpu", [0]), f"placement {w.placement}")
check(w.sbp == (sbp.broadcast,) and tuple(w.shape) == (6, 4), f"sbp {w.sbp} shape {w.shape}")
check.close(w.numpy(), W, "the loaded global weight's value on every rank")
check(got["step"] == 3, "a scalar leaf reaches every rank")
check(got["arr"].dtype == np.int16 and got["arr"].tolist() == [0, 1, 2], "an array leaf too")
resplit = w.to_global(everywhere, sbp.split(0))
check.close(resplit.to_local().numpy(), split_rows(W), "to_global splits the loaded weight")

# (past that collective load, rank 0 has finished writing: every rank reads the files)
local = flow.load(path)
check(not local["model"]["weight"].is_global, "a plain load gives local tensors")
check.close(local["model"]["weight"].numpy(), W, "saved weight is the whole value")
check.close(local["model"]["bias"].numpy(), B, "saved bias is the whole value")
check(sorted(os.listdir(path)) == ["arr", "flow_checkpoint.json", "model", "snapshot_done"],
      f"layout {sorted(os.listdir(path))}")

# into a global module (placement and sbp converted with to_global first)
fresh = nn.Linear(4, 6)
fresh.to_global(everywhere, sbp.broadcast)
fresh.load_state_dict({k: v.to_global(everywhere, sbp.broadcast)
                       for k, v in got["model"].items()})  # fmt: skip
check.close(fresh.weight.numpy(), W, "the module holds the loaded weight")
x = flow.tensor(np.ones((2, 4), np.float32)).to_global(everywhere, sbp.broadcast)
check.close(fresh(x).numpy(), np.ones((2, 4), np.float32) @ W.T + B, "and computes with it")

# the save_load page's pattern: each rank saves its shards to a path of its own
mine = os.path.join(root, f"rank_{rank}")
flow.save({k: v.to_local() for k, v in model.state_dict().items()}, mine)
back = flow.load(mine)
check.close(back["weight"].numpy(), split_rows(W), "a rank's own shard round-trips")

# errors reach every rank: no rank waits for a broadcast that never comes
try:
    flow.load(os.path.join(root, "missing"), global_src_rank=0)
    check(False, "loading a missing path must fail")
except FileNotFoundError as err:
    check("missing" in str(err), f"the error names the path: {err}")
    check(rank == 0 or "rank 0" in str(err), f"other ranks learn where it failed: {err}")
try:
    flow.save(state, os.path.join(root, "racy"))
    check(False, "saving global tensors from every rank to one path must fail")
except ValueError as err:
    check("global_dst_rank" in str(err), f"the error says how to save them: {err}")
check(not os.path.exists(os.path.join(root, "racy")), "nothing was written")
try:
    flow.save(state, path, global_dst_rank=world)
    check(False, "a rank outside the world must fail")
except ValueError as err:
    check(f"[0, {world})" in str(err), str(err))
check.done()
