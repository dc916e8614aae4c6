"""`Tensor.__getitem__` eagerly and through `flow.jit` against numpy's indexing.

Static keys are grouped so that one compiled function checks a family of keys;
tensor-valued indices are traced (their values reach compiled code at run time).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from checks import check, data

import flow

A = (3, 4, 5)
_M = np.array([[True, False, True, True], [False, False, True, False], [True] * 4])

KEYS = {
    "ints": [1, -1, (0, 2), (-3, -4, -5), (2, 3, 4), ()],
    "slices": [
        slice(1, None),
        (slice(None), slice(1, 3)),
        (slice(None, None, 2), slice(-3, None), slice(1, 5, 3)),
        (slice(10, 20),),
        (slice(-10, 2),),
        (1, slice(None), slice(2, None)),
    ],
    "negative_steps": [
        slice(None, None, -1),
        (slice(None), slice(None, None, -2)),
        (slice(2, 0, -1), slice(-1, -5, -3), slice(None, None, -4)),
        (slice(0, 3, -1),),
    ],
    "none_ellipsis": [
        None,
        (None, 1, None),
        Ellipsis,
        (Ellipsis, 1),
        (1, Ellipsis, None),
        (slice(None), None, Ellipsis, slice(None, None, 2)),
    ],
    "arrays": [
        [0, 2, -1, 0],
        ([[0, 1], [2, -3]],),
        ([0, 2], [1, 3]),
        (slice(None), [3, 0, 1]),
        ([[0], [2]], slice(None), [1, 4, -5]),
        (1, slice(None), [0, 4]),
        (slice(None), 1, [0, 4]),
        (Ellipsis, [4, 0], None),
        (np.array([2, 1]), np.int64(0)),
        (slice(None, None, -1), [1, 3], slice(1, 4, 2)),
        ([],),
    ],
    "masks": [
        _M,
        (slice(None), np.array([True, False, False, True])),
        ([True, False, True], 0),
        np.zeros(A, bool),
        (Ellipsis, np.array([False, True, True, False, True])),
    ],
}


@pytest.mark.parametrize("group", list(KEYS))
def test_static_keys(rng, group):
    keys = KEYS[group]
    x = data(rng, A)
    check(lambda t: tuple(t[k] for k in keys), lambda a: tuple(a[k] for k in keys), x,
          name=group)  # fmt: skip


def test_int_and_bool_dtypes(rng):
    for dtype in (np.int32, np.bool_):
        x = data(rng, (4, 3), dtype)
        check(lambda t: (t[1:, ::-2], t[[2, 0]], t[-1]),
              lambda a: (a[1:, ::-2], a[[2, 0]], a[-1]), x)  # fmt: skip


def test_noncontiguous_inputs(rng):
    base = data(rng, (6, 5))
    for view in (base.T, base[::2, 1:], base[::-1]):
        t = flow.from_numpy(view)
        assert not view.flags.c_contiguous
        for key in ((1, slice(None, None, -1)), ([2, 0], slice(1, None)), (view > 0,)):
            np.testing.assert_array_equal(t[key].numpy(), view[key])
    check(lambda t: (t[::-1, 1], t[[1, 0]]), lambda a: (a[::-1, 1], a[[1, 0]]), base.T)


def test_empty_dims(rng):
    x = data(rng, (0, 3))
    check(
        lambda t: (t[:, 1], t[:, [0, 2]], t[[]], t[..., ::-1], t[None]),
        lambda a: (a[:, 1], a[:, [0, 2]], a[np.array([], np.int64)], a[..., ::-1], a[None]),
        x,
    )
    y = data(rng, (4, 3))
    check(lambda t: (t[3:1], t[:, 5:], t[[]], t[False]),
          lambda a: (a[3:1], a[:, 5:], a[np.array([], np.int64)], a[False]), y)  # fmt: skip


def test_bool_scalar_index(rng):
    x = data(rng, (2, 3))
    check(lambda t: (t[True], t[None, False]), lambda a: (a[True], a[None, False]), x)


def _random_key(r, rng, shape):
    """A random mix of ints, slices (any step), None, ..., int lists and bool masks."""
    items, d = [], 0
    while d < len(shape) and r.random() < 0.85:
        n, c = shape[d], r.random()
        if c < 0.1:
            items.append(None)
            continue
        if c < 0.15:
            items.append(Ellipsis)
            break
        if c < 0.35 and n:
            items.append(r.randrange(-n, n))
        elif c < 0.65 or not n:
            bound = [None, *range(-n - 2, n + 3)]
            items.append(slice(r.choice(bound), r.choice(bound), r.choice([None, 1, 2, -1, -3])))
        elif c < 0.85:
            items.append(rng.integers(-n, n, (r.randrange(0, 3),) * r.randrange(1, 3)).tolist())
        else:
            items.append(rng.random(n) > 0.5)
        d += 1
    return tuple(items)


def test_random_keys_eagerly_match_numpy(rng):
    r = random.Random(0)
    for _ in range(400):
        shape = tuple(r.randrange(0, 4) for _ in range(r.randrange(0, 4)))
        a = data(rng, shape)
        key = _random_key(r, rng, shape)
        try:
            expected = a[key]
        except IndexError:
            with pytest.raises(IndexError):
                flow.from_numpy(a)[key]
            continue
        got = flow.from_numpy(a)[key].numpy()
        assert got.shape == expected.shape, f"{shape} {key}: {got.shape} != {expected.shape}"
        np.testing.assert_array_equal(got, expected, err_msg=f"{shape} {key}")


# --------------------------------------------------------------------------- traced indices


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_tensor_index(rng, dtype):
    x = data(rng, A)
    i = np.array([[2, -1], [0, -3]], dtype)
    j = np.array([3, -4], dtype)
    check(
        lambda t, i, j: (t[i], t[:, j], t[i, :, j], t[0, :, j], t[i, j], t[:, 1, j]),
        lambda a, i, j: (a[i], a[:, j], a[i, :, j], a[0, :, j], a[i, j], a[:, 1, j]),
        x, i, j,
    )  # fmt: skip


def test_int32_indices_stay_int32_in_compiled_code(rng):
    """No widening cast: two gathers sharing one int64 copy of the index read it zero-extended
    on lavapipe (negative indices went wrong); int64 indices stay int64."""
    x = data(rng, A)
    for dtype, cast in ((np.int32, False), (np.int64, False), (np.int8, True)):
        j = np.array([3, -4], dtype)
        text = flow.jit(lambda t, j: (t[:, j], t[:, 1, j], t.index_select(2, j.abs()))).lower(
            x, j).as_text()  # fmt: skip
        assert ("flow.cast" in text) == cast, text
        assert f"tensor<2x{'i32' if dtype == np.int32 else 'i64'}>" in text


def test_tensor_index_mixed_with_constants(rng):
    x = data(rng, A)
    i = np.array([1, -1, 0])
    check(lambda t, i: (t[i, [0, 3, 1]], t[[2], :, i]),
          lambda a, i: (a[i, [0, 3, 1]], a[[2], :, i]), x, i)  # fmt: skip


def test_zero_dim_tensor_index(rng):
    x = data(rng, A)
    check(lambda t, i: t[:, i.reshape(())], lambda a, i: a[:, i.reshape(())], x, np.array([-2]))


def test_compiled_index_out_of_range_raises(rng):
    x = data(rng, (5, 2))
    with pytest.raises(IndexError, match="getitem: index 7 is out of bounds for dim 0 with size 5"):
        flow.jit(lambda t, i: t[i])(x, np.array([7, -9, 4]))  # more: test_index_checks.py


def test_iteration(rng):
    x = data(rng, (3, 2))
    rows = list(flow.tensor(x))
    assert len(rows) == 3
    for r, a in zip(rows, x):
        np.testing.assert_array_equal(r.numpy(), a)
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(flow.tensor([1.0]).reshape(()))


# --------------------------------------------------------------------------- errors


def raises_both(fn, args, cls, match):
    """`fn` raises `cls` matching `match` eagerly and while tracing for `flow.jit`."""
    with pytest.raises(cls, match=match):
        fn(*(flow.tensor(a) for a in args))
    with pytest.raises(cls, match=match):
        flow.jit(fn).lower(*args)


ERRORS = [
    (lambda t: t[3], IndexError, "getitem: index 3 is out of bounds for dim 0 with size 3"),
    (lambda t: t[0, -5], IndexError, "index -5 is out of bounds for dim 1 with size 4"),
    (lambda t: t[0, 0, 0, 0], IndexError, "too many indices for a tensor of rank 3: 4 indexed"),
    (lambda t: t[..., 0, ...], IndexError, r"only have a single ellipsis \('...'\)"),
    (lambda t: t[:, [0, 4]], IndexError, "index 4 is out of bounds for dim 1 with size 4"),
    (lambda t: t[[0, 1], [0, 1, 2]], IndexError,
     r"could not be broadcast together with shapes \[2\], \[3\]"),
    (lambda t: t[1.5], IndexError, "only ints, slices, None, ..., and integer or bool"),
    (lambda t: t["a"], IndexError, "got str"),
    (lambda t: t[[0.5]], IndexError, "arrays used as indices must be integer or bool"),
    (lambda t: t[::0], ValueError, "slice step cannot be zero"),
    (lambda t: t[np.ones((3, 5), bool)], IndexError,
     r"boolean mask of shape \[3, 5\] does not match dim 1 of size 4"),
    (lambda t: t[True, [0]], IndexError, "bool scalar index cannot be combined"),
    (lambda t: t[t], IndexError, "tensors used as indices must be integer or bool tensors"),
]  # fmt: skip


@pytest.mark.parametrize("fn,cls,match", ERRORS)
def test_errors(rng, fn, cls, match):
    raises_both(fn, [data(rng, A)], cls, match)


def test_error_names_the_user_line(rng):
    with pytest.raises(IndexError, match=r"at .*test_movement.py:\d+: .*\)\[7\]"):
        flow.tensor(data(rng, (2,)))[7]


def test_mask_inside_jit_says_shape_depends_on_data(rng):
    x = data(rng, (3, 4))
    with pytest.raises(IndexError, match=r"depends on the mask's values.*flow.where.*masked_fill"):
        flow.jit(lambda t: t[t > 0]).lower(x)
    with pytest.raises(IndexError, match="depends on the mask's values"):
        flow.jit(lambda t, m: t[m]).lower(x, x > 0)
    # Eagerly a tensor mask works.
    t = flow.tensor(x)
    np.testing.assert_array_equal(t[t > 0].numpy(), x[x > 0])


def test_eager_tensor_index_out_of_range():
    x = flow.tensor(np.zeros((3, 2), np.float32))
    with pytest.raises(IndexError, match="index -4 is out of bounds for dim 0 with size 3"):
        x[flow.tensor([0, -4])]
    with pytest.raises(IndexError, match="index 2 is out of bounds for dim 1 with size 2"):
        x[:, flow.tensor([[2]])]
