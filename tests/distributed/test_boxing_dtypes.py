"""Eager boxing keeps every element type and value: every pair of SBP entries on 2 and 3 ranks
(even and uneven splits) and on a 2x2 mesh, and placement changes, checked against numpy and
mpi4py's own allgather (rank_boxing_dtypes.py)."""

from __future__ import annotations

import pytest
from conftest import HERE, launch

SCRIPT = HERE / "rank_boxing_dtypes.py"


@pytest.mark.parametrize("nproc", [2, 3, 4])
def test_boxing_every_pair_and_dtype(nproc):
    run = launch(nproc, SCRIPT, timeout=240)
    assert run.checks_passed(nproc) > 800, run.describe()
