"""Eager global tensors (placement, SBP, boxing, global ops, creation ops) on 2 and 4 ranks,
and in a single process (a world of one, no MPI)."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from conftest import HERE, launch, run_command

import flow
from flow.distributed.placement import placement, sbp

SCRIPT = HERE / "rank_global_eager.py"


def _single_process_digest() -> str:
    run = run_command([sys.executable, str(SCRIPT)], timeout=60)
    assert run.returncode == 0, run.describe()
    assert "mpi4py" not in run.stderr, run.describe()
    (digest,) = re.findall(r"rank 0: \d+ checks passed random=(\w+)", run.stdout)
    return digest


@pytest.mark.parametrize("nproc", [2, 4])
def test_global_eager_on_ranks(nproc):
    run = launch(nproc, SCRIPT, timeout=60)
    assert run.returncode == 0, run.describe()
    found = re.findall(r"rank (\d): (\d+) checks passed random=(\w+)", run.stdout)
    assert sorted(r for r, _, _ in found) == [str(r) for r in range(nproc)], run.describe()
    assert len({n for _, n, _ in found}) == 1 and int(found[0][1]) > 150, run.describe()
    # The random global tensors are the same on every rank, for every SBP and world size.
    assert {d for _, _, d in found} == {_single_process_digest()}, run.describe()


def test_world_of_one_without_launcher():
    pl = placement("cpu", [0])
    assert pl == placement.all("cpu") and hash(pl) == hash(placement("cpu", [0]))
    assert pl.type == "cpu" and pl.ranks == [0] and pl.hierarchy == (1,)
    assert repr(sbp.split(1)) == "flow.sbp.split(dim=1)"
    assert repr(sbp.broadcast) == "flow.sbp.broadcast" and repr(sbp.partial_sum).endswith("sum")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = flow.tensor(a).to_global(pl, sbp.split(0))
    assert x.is_global and x.sbp == (sbp.split(0),) and x.placement == pl
    assert tuple(x.shape) == (3, 4) and not flow.tensor(a).is_global
    y = (x @ x.T).sum(0)
    np.testing.assert_allclose(y.numpy(), (a @ a.T).sum(0))
    np.testing.assert_array_equal(x.to_global(sbp=sbp.partial_sum).to_local().numpy(), a)
    with pytest.raises(ValueError, match="outside the world of 1 process"):
        placement("cpu", [0, 1])
    with pytest.raises(ValueError, match="local tensor of shape"):
        x + flow.tensor(a)
    with pytest.raises(ValueError, match="split dim 2 is out of range"):
        flow.tensor(a).to_global(pl, sbp.split(2))
    with pytest.raises(ValueError, match="one SBP entry per placement axis"):
        flow.tensor(a).to_global(pl, [sbp.broadcast, sbp.broadcast])


@pytest.mark.parametrize("nproc", [2, 4])
def test_composites_on_global_tensors(nproc):
    # Interpolation, sorting, cumsum and dropout build local constants: broadcast, not errors.
    run = launch(nproc, HERE / "rank_global_composites.py", timeout=90)
    assert run.checks_passed(nproc) == 26, run.describe()
