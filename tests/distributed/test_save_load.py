"""Global checkpoints on 2 ranks: `flow.save(..., global_dst_rank=0)` and
`flow.load(..., global_src_rank=0)` (OneFlow's distributed save/load), run by
rank_save_load.py; the files match a single-process save of the same values."""

from __future__ import annotations

import numpy as np
from conftest import HERE, launch

import flow

SCRIPT = HERE / "rank_save_load.py"


def test_global_save_and_load_on_two_ranks(tmp_path):
    run = launch(2, SCRIPT, str(tmp_path), timeout=120)
    assert run.checks_passed(2) == 19, run.describe()
    got = flow.load(tmp_path / "global_ckpt")  # read back in this process, with no ranks
    w = np.arange(24, dtype=np.float32).reshape(6, 4) / 10
    np.testing.assert_array_equal(got["model"]["weight"].numpy(), w)
    assert got["step"] == 3
    shards = [flow.load(tmp_path / f"rank_{r}")["weight"].numpy() for r in range(2)]
    np.testing.assert_array_equal(np.concatenate(shards), w)
