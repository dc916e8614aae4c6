"""`flow.jit` and `nn.Graph` on global tensors: run on 2 ranks (rank_global_jit.py), plus the
traced IR and signatures, which need no launcher (a world of one)."""

from __future__ import annotations

import numpy as np
from conftest import HERE, launch

import flow
from flow.distributed.placement import placement, sbp


def test_global_jit_on_two_ranks():
    run = launch(2, HERE / "rank_global_jit.py", timeout=90)
    run.checks_passed(2)


def _glob(value, nd):
    return flow.tensor(value).to_global(placement("cpu", [0]), nd)


def test_global_arguments_trace_with_their_distribution():
    def f(x, w):
        return flow.matmul(x * 2.0, w).sum(dim=0)

    x = _glob(np.ones((4, 3), np.float32), sbp.split(0))
    w = _glob(np.ones((3, 2), np.float32), sbp.broadcast)
    low = flow.jit(f).lower(x, w)
    assert low.is_global
    text = low.as_text()
    assert "#flow.dist" in text and "sbp_signature" in text, text
    # The result takes the distribution inference chose: a sum over the split dim is partial.
    (info,) = low.out_dists
    assert f"{info.sbp[0]}" == "P", info


def test_signature_includes_placement_and_sbp():
    jf = flow.jit(lambda x: x + 1.0)
    a = jf.lower(_glob(np.ones((4,), np.float32), sbp.split(0))).signature
    b = jf.lower(_glob(np.ones((4,), np.float32), sbp.broadcast)).signature
    c = jf.lower(np.ones((4,), np.float32)).signature
    assert len({a, b, c}) == 3


def test_captured_global_parameter_is_a_distributed_argument():
    w = _glob(np.ones((3, 2), np.float32), sbp.broadcast)
    low = flow.jit(lambda x: flow.matmul(x, w)).lower(
        _glob(np.ones((4, 3), np.float32), sbp.split(0))
    )
    assert low.captured == [w]
    assert low.as_text().count("#flow.sbp<[B]>") >= 1
