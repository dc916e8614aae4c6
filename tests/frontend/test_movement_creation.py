"""Creation ops built on iota (arange, linspace, eye) and full_like, eagerly and compiled."""

from __future__ import annotations

import numpy as np
import pytest
from checks import check, data

import flow

F32 = np.float32


def raises_both(fn, args, cls, match):
    with pytest.raises(cls, match=match):
        fn(*(flow.tensor(a) for a in args))
    with pytest.raises(cls, match=match):
        flow.jit(fn).lower(*args)


def test_arange():
    check(
        lambda: (flow.arange(5), flow.arange(2, 11, 3), flow.arange(10, -3, -4),
                 flow.arange(0, 1, 0.125), flow.arange(1.5, -1, -0.5), flow.arange(3, 3),
                 flow.arange(7, dtype=flow.float64), flow.arange(1, 4, dtype=flow.int32),
                 flow.arange(0.0, 3.0, dtype=flow.int64), flow.arange(-2, 2, 1, dtype=flow.float16)),
        lambda: (np.arange(5), np.arange(2, 11, 3), np.arange(10, -3, -4),
                 np.arange(0, 1, 0.125, dtype=F32), np.arange(1.5, -1, -0.5, dtype=F32),
                 np.arange(0), np.arange(7, dtype=np.float64), np.arange(1, 4, dtype=np.int32),
                 np.arange(3), np.arange(-2, 2, dtype=np.float16)),
    )  # fmt: skip


def test_arange_length_is_ceil_of_the_range_over_the_step():
    assert flow.arange(0, 1, 0.1).shape == (10,)
    assert flow.arange(0, 1.0000001, 0.1).shape == (11,)
    assert flow.arange(0, 1, 0.3).shape == (4,)
    assert flow.arange(0, 10, 3).tolist() == [0, 3, 6, 9]
    assert flow.arange(np.int64(4)).dtype is flow.int64
    assert flow.arange(np.float32(2)).dtype is flow.float32


def test_linspace():
    check(
        lambda: (flow.linspace(0, 1, 5), flow.linspace(-3, 7.5, 8), flow.linspace(2, 2, 1),
                 flow.linspace(0, 1, 0), flow.linspace(10, 0, 6, dtype=flow.float64),
                 flow.linspace(0, 10, 4, dtype=flow.int64)),
        lambda: (np.linspace(0, 1, 5, dtype=F32), np.linspace(-3, 7.5, 8, dtype=F32),
                 np.array([2], F32), np.zeros(0, F32), np.linspace(10, 0, 6),
                 np.linspace(0, 10, 4).astype(np.int64)),
        rtol=1e-6, atol=1e-6,
    )  # fmt: skip
    ends = flow.linspace(-1.3, 2.7, 7).numpy()
    assert ends[0] == F32(-1.3) and ends[-1] == F32(2.7)


def test_eye_full_like(rng):
    x = data(rng, (2, 3), np.int32)
    check(
        lambda x: (flow.eye(3), flow.eye(2, 4), flow.eye(0, 2), flow.eye(3, dtype=flow.int64),
                   flow.eye(2, dtype=flow.bool), flow.full_like(x, 7), flow.full_like(x, 2.5, dtype=flow.float32)),
        lambda x: (np.eye(3, dtype=F32), np.eye(2, 4, dtype=F32), np.eye(0, 2, dtype=F32),
                   np.eye(3, dtype=np.int64), np.eye(2, dtype=bool), np.full((2, 3), 7, np.int32),
                   np.full((2, 3), 2.5, F32)),
        x,
    )  # fmt: skip


CREATION_ERRORS = [
    (lambda: flow.arange(0, 5, 0), ValueError, "arange: step must be nonzero"),
    (lambda: flow.arange(5, 0), ValueError,
     r"upper bound and lower bound are inconsistent with the step sign \(start=5, end=0, step=1\)"),
    (lambda: flow.arange(0, float("inf")), ValueError, "bounds must be finite"),
    (lambda: flow.arange("a"), TypeError, "arange: expected a number for end, got 'a'"),
    (lambda: flow.linspace(0, 1, -1), ValueError, "number of steps must be non-negative, got -1"),
    (lambda: flow.linspace(0, 1, 2.0), TypeError, "expected an int steps"),
    (lambda: flow.eye(-1), ValueError, "eye: n and m must be non-negative, got n=-1, m=-1"),
    (lambda: flow.eye(2, 1.5), TypeError, "eye: expected an int m"),
]  # fmt: skip


@pytest.mark.parametrize("fn,cls,match", CREATION_ERRORS)
def test_creation_errors(fn, cls, match):
    raises_both(fn, [], cls, match)
