"""nn.utils.clip_grad_norm_ / clip_grad_value_ against numpy (and torch where installed);
global parameters are checked on 2 ranks in tests/distributed/test_clip_grad_global.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

import flow
import flow.nn as nn


def _params(seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (4,), (2, 2, 2))]
    params = [nn.Parameter(flow.tensor(a)) for a in arrays]
    grads = [rng.standard_normal(a.shape).astype(np.float32) for a in arrays]
    for p, g in zip(params, grads):
        p.grad = flow.tensor(g)
    return params, grads


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_matches_numpy(norm_type, max_norm):
    params, grads = _params()
    flat = np.concatenate([g.ravel() for g in grads]).astype(np.float64)
    want = np.linalg.norm(flat, norm_type)
    total = nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type)
    assert total.shape == ()
    np.testing.assert_allclose(total.numpy(), want, rtol=1e-5)
    coef = min(1.0, max_norm / (want + 1e-6))
    for p, g in zip(params, grads):
        np.testing.assert_allclose(p.grad.numpy(), g * coef, rtol=1e-5, atol=1e-7)
    clipped = np.concatenate([p.grad.numpy().ravel() for p in params])
    assert np.linalg.norm(clipped, norm_type) <= max_norm * (1 + 1e-5) or coef == 1.0


def test_clip_grad_norm_edge_cases():
    p = nn.Parameter(flow.tensor(np.array([3.0, 4.0], np.float32)))
    assert float(nn.utils.clip_grad_norm_(p, 1.0).numpy()) == 0.0  # no grad yet
    p.grad = flow.tensor(np.array([3.0, 4.0], np.float32))
    np.testing.assert_allclose(nn.utils.clip_grad_norm_(p, 1.0).numpy(), 5.0)  # one tensor
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8], rtol=1e-5)
    p.grad = flow.tensor(np.array([np.inf, 1.0], np.float32))
    with pytest.raises(RuntimeError, match="total norm of order 2.0 .* is non-finite"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    assert np.isinf(nn.utils.clip_grad_norm_([p], 1.0).numpy())
    with pytest.raises(ValueError, match="norm_type to be a positive number or inf"):
        nn.utils.clip_grad_norm_([p], 1.0, norm_type=-1)
    with pytest.raises(TypeError, match="parameters to be tensors"):
        nn.utils.clip_grad_norm_([p, 3], 1.0)


def test_clip_grad_value_matches_numpy():
    params, grads = _params(1)
    assert nn.utils.clip_grad_value_(params, 0.5) is None
    for p, g in zip(params, grads):
        np.testing.assert_array_equal(p.grad.numpy(), np.clip(g, -0.5, 0.5))


def test_clipping_in_a_training_step_matches_torch():
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed: the PyTorch comparison needs it (numpy tests "
                    "cover the math)")  # fmt: skip
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2))
    fm = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))
    fm.load_state_dict({k: flow.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    (tm(torch.tensor(x)) ** 2).sum().backward()
    (fm(flow.tensor(x)) ** 2).sum().backward()
    for norm_type in (2.0, math.inf):
        tn = torch.nn.utils.clip_grad_norm_(tm.parameters(), 0.3, norm_type)
        fn = nn.utils.clip_grad_norm_(fm.parameters(), 0.3, norm_type)
        np.testing.assert_allclose(fn.numpy(), tn.numpy(), rtol=1e-5)
    torch.nn.utils.clip_grad_value_(tm.parameters(), 0.01)
    nn.utils.clip_grad_value_(fm.parameters(), 0.01)
    for (name, p), q in zip(fm.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-7,
                                   err_msg=name)  # fmt: skip
