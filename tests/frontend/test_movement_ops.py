"""Joining, splitting, reordering, gathering and padding ops, eagerly and through `flow.jit`,
against numpy references (np.concatenate, np.take_along_axis, np.flip, np.roll, np.pad, ...).
"""

from __future__ import annotations

import numpy as np
import pytest
from checks import check, data

import flow

F32 = np.float32


def raises_both(fn, args, cls, match):
    """`fn` raises `cls` matching `match` eagerly and while tracing for `flow.jit`."""
    with pytest.raises(cls, match=match):
        fn(*(flow.tensor(a) for a in args))
    with pytest.raises(cls, match=match):
        flow.jit(fn).lower(*args)


def _eager_views(fn, ref, base):
    """`fn` on non-contiguous views (transposed, strided, reversed) matches `ref`."""
    for view in (base.T, base[::2], base[::-1, ::-1]):
        assert not view.flags.c_contiguous
        for g, e in zip(fn(flow.from_numpy(view)), ref(view)):
            np.testing.assert_array_equal(g.numpy(), e)


# --------------------------------------------------------------------------- cat / stack


def test_cat(rng):
    a, b, c = data(rng, (2, 3)), data(rng, (2, 0)), data(rng, (2, 4))
    check(
        lambda a, b, c: (flow.cat([a, b, c], 1), flow.cat((a, c), dim=-1), flow.concat([a, a]),
                         flow.concatenate([c], 0)),
        lambda a, b, c: (np.concatenate([a, b, c], 1), np.concatenate([a, c], -1),
                         np.concatenate([a, a]), c),
        a, b, c,
    )  # fmt: skip


def test_cat_promotes_and_skips_legacy_empty(rng):
    a, b = data(rng, (2, 3), np.int32), data(rng, (1, 3))
    empty = np.zeros((0,), F32)
    check(
        lambda a, b, e: (flow.cat([a, b]), flow.cat([e, a, e]), flow.cat([e, e])),
        lambda a, b, e: (np.concatenate([a, b]).astype(F32), a.astype(F32), e),
        a, b, empty,
    )  # fmt: skip
    _eager_views(lambda t: (flow.cat([t, t], 1),), lambda v: (np.concatenate([v, v], 1),),
                 data(rng, (4, 6)))  # fmt: skip


def test_stack(rng):
    a, b = data(rng, (2, 3)), data(rng, (2, 3))
    check(
        lambda a, b: (flow.stack([a, b]), flow.stack([a, b], -1), flow.stack((a,), 1)),
        lambda a, b: (np.stack([a, b]), np.stack([a, b], -1), np.stack([a], 1)),
        a, b,
    )  # fmt: skip


CAT_ERRORS = [
    (lambda a, b: flow.cat([]), ValueError, "cat: expected a non-empty list of tensors"),
    (lambda a, b: flow.cat(a), TypeError, "cat: expected a list or tuple of tensors, got Tensor"),
    (lambda a, b: flow.cat([a, b.sum()]), ValueError,
     r"zero-dimensional tensor \(at position 1\) cannot be concatenated"),
    (lambda a, b: flow.cat([a, b]), ValueError,
     "sizes of tensors must match except in dim 0: expected size 3 but got size 2 for tensor 1"),
    (lambda a, b: flow.cat([a, b.reshape(1, 2, 2)]), ValueError,
     "tensors must have the same rank: expected 2, got 3 for tensor 1"),
    (lambda a, b: flow.cat([a, a], 2), IndexError, r"dim 2 is out of range .* \[-2, 1\]"),
    (lambda a, b: flow.stack([a, b]), ValueError,
     r"stack: expects each tensor to be equal size, but got \[2, 3\] at entry 0 and \[4\] at entry 1"),
    (lambda a, b: flow.stack([a], 3), IndexError, "dim 3 is out of range"),
]  # fmt: skip


@pytest.mark.parametrize("fn,cls,match", CAT_ERRORS)
def test_cat_stack_errors(rng, fn, cls, match):
    a, b = data(rng, (2, 3)), data(rng, (4,))
    b = b.reshape(2, 2) if "sizes of" in match else b
    raises_both(fn, [a, b], cls, match)


# --------------------------------------------------------------------------- splitting


def _np_split(a, sizes, axis):
    return np.split(a, np.cumsum(sizes)[:-1], axis=axis)


def test_split_chunk_unbind(rng):
    x = data(rng, (5, 6))
    check(
        lambda t: (t.split(2), flow.split(t, [1, 0, 5], dim=-1), t.chunk(4, 1), t.chunk(3),
                   t.unbind(1), flow.unbind(t)),
        lambda a: (_np_split(a, [2, 2, 1], 0), _np_split(a, [1, 0, 5], 1),
                   _np_split(a, [2, 2, 2], 1), _np_split(a, [2, 2, 1], 0),
                   [a[:, i] for i in range(6)], list(a)),
        x,
    )  # fmt: skip


def test_split_and_chunk_of_empty_dim(rng):
    x = data(rng, (0, 2))
    t = flow.tensor(x)
    assert [p.shape for p in t.split(3)] == [(0, 2)]
    assert [p.shape for p in t.chunk(3)] == [(0, 2)] * 3
    assert t.unbind() == ()


def test_narrow_select(rng):
    x = data(rng, (4, 5))
    check(
        lambda t: (t.narrow(1, 1, 3), flow.narrow(t, 0, -2, 2), t.narrow(0, 4, 0), t.select(1, -1),
                   flow.select(t, 0, 2)),
        lambda a: (a[:, 1:4], a[2:], a[4:4], a[:, -1], a[2]),
        x,
    )  # fmt: skip
    _eager_views(lambda t: (t.narrow(1, 1, 2), t.select(0, 1)), lambda v: (v[:, 1:3], v[1]),
                 data(rng, (6, 4)))  # fmt: skip


SPLIT_ERRORS = [
    (lambda t: t.split(0), ValueError, "split_size must be positive"),
    (lambda t: t.split([2, 2]), ValueError, r"split sizes must be non-negative and sum to 5 .* got \[2, 2\]"),
    (lambda t: t.split(2, dim=2), IndexError, "dim 2 is out of range"),
    (lambda t: t.chunk(0), ValueError, "chunk: expected chunks > 0, got 0"),
    (lambda t: t.narrow(0, 4, 2), ValueError, r"start \(4\) \+ length \(2\) exceeds dim 0 of size 5"),
    (lambda t: t.narrow(0, 6, 0), IndexError, "start 6 is out of range for dim 0 of size 5"),
    (lambda t: t.narrow(0, 5, 1), ValueError, r"start \(5\) \+ length \(1\) exceeds dim 0 of size 5"),
    (lambda t: t.select(1, 3), IndexError, "select: index 3 is out of range for dim 1 of size 3"),
    (lambda t: t.select(0, 1.0), TypeError, "expected an int index, got 1.0"),
    (lambda t: t.sum().select(0, 0), IndexError, "select: cannot be applied to a 0-dim tensor"),
    (lambda t: t.sum().split(1), IndexError, "split: cannot be applied to a 0-dim tensor"),
]  # fmt: skip


@pytest.mark.parametrize("fn,cls,match", SPLIT_ERRORS)
def test_split_errors(rng, fn, cls, match):
    raises_both(fn, [data(rng, (5, 3))], cls, match)


# --------------------------------------------------------------------------- reordering


def test_flip_roll(rng):
    x = data(rng, (3, 4, 5))
    check(
        lambda t: (t.flip(0, 2), flow.flip(t, (-1,)), t.flip([]), t.roll(2, 1),
                   flow.roll(t, (-1, 7), (0, 2)), t.roll(5), t.roll(0, 0)),
        lambda a: (np.flip(a, (0, 2)), np.flip(a, -1), a, np.roll(a, 2, 1),
                   np.roll(a, (-1, 7), (0, 2)), np.roll(a, 5), a),
        x,
    )  # fmt: skip
    _eager_views(lambda t: (t.flip(0), t.roll(1, 1)), lambda v: (v[::-1], np.roll(v, 1, 1)),
                 data(rng, (6, 4)))  # fmt: skip


def test_flip_roll_empty_and_int(rng):
    x = data(rng, (0, 3), np.int32)
    check(lambda t: (t.flip(0, 1), t.roll(2, 0), t.roll(1, 1)),
          lambda a: (a, a, np.roll(a, 1, 1)), x)  # fmt: skip


def test_movedim_repeat_tile(rng):
    x = data(rng, (2, 3, 4))
    check(
        lambda t: (t.movedim(0, -1), flow.movedim(t, (0, 1), (2, 0)), t.repeat(2, 1, 3),
                   t.repeat(2, 1, 1, 1), t.repeat((1, 0, 2)), t.tile((2,)), flow.tile(t, (3, 1, 1, 1))),
        lambda a: (np.moveaxis(a, 0, -1), np.moveaxis(a, (0, 1), (2, 0)), np.tile(a, (2, 1, 3)),
                   np.tile(a, (2, 1, 1, 1)), np.tile(a, (1, 0, 2)), np.tile(a, 2),
                   np.tile(a, (3, 1, 1, 1))),
        x,
    )  # fmt: skip
    _eager_views(lambda t: (t.repeat(2, 1),), lambda v: (np.tile(v, (2, 1)),), data(rng, (4, 6)))


REORDER_ERRORS = [
    (lambda t: t.flip(0, 0), ValueError, r"flip: dims \[0, 0\] contain duplicates"),
    (lambda t: t.flip(3), IndexError, "flip: dim 3 is out of range"),
    (lambda t: t.roll((1, 2)), ValueError, r"roll: expected one shift without dims, got \[1, 2\]"),
    (lambda t: t.roll((1, 2), 0), ValueError, "shifts and dims must align, got 2 shifts and 1 dims"),
    (lambda t: t.roll(1.5, 0), TypeError, "roll: expected an int shift"),
    (lambda t: t.movedim((0, 1), 0), ValueError, "source and destination must have the same number"),
    (lambda t: t.repeat(2), ValueError, r"repeat: expected at least 2 repeat counts .* got \[2\]"),
    (lambda t: t.repeat(1, -1), ValueError, "expected non-negative repeat counts"),
]  # fmt: skip


@pytest.mark.parametrize("fn,cls,match", REORDER_ERRORS)
def test_reorder_errors(rng, fn, cls, match):
    raises_both(fn, [data(rng, (2, 3))], cls, match)


# --------------------------------------------------------------------------- gathering


def test_gather(rng):
    x = data(rng, (3, 4, 5))
    i0 = rng.integers(0, 3, (2, 4, 5))
    i1 = rng.integers(0, 4, (3, 6, 2)).astype(np.int32)
    i2 = rng.integers(0, 5, (1, 1, 7))
    check(
        lambda t, i0, i1, i2: (t.gather(0, i0), flow.gather(t, 1, i1), t.gather(-1, i2)),
        lambda a, i0, i1, i2: (np.take_along_axis(a, i0, 0),
                               np.take_along_axis(a[:, :, :2], i1, 1),
                               np.take_along_axis(a[:1, :1], i2, 2)),
        x, i0, i1, i2,
    )  # fmt: skip
    _eager_views(lambda t: (t.gather(1, flow.tensor([[1, 0]] * t.shape[0])),),
                 lambda v: (v[:, [1, 0]],), data(rng, (4, 6)))  # fmt: skip


def test_gather_empty_and_int(rng):
    x = data(rng, (3, 4), np.int64)
    check(lambda t, i: (t.gather(1, i), t.gather(0, i[:0])),
          lambda a, i: (np.take_along_axis(a, i, 1), a[:0, :2]), x, rng.integers(0, 4, (3, 2)))  # fmt: skip


def test_take_along_dim_and_index_select(rng):
    x = data(rng, (3, 4))
    i = rng.integers(0, 4, (1, 5))
    j = np.array([2, 0, 2], np.int32)
    check(
        lambda t, i, j: (flow.take_along_dim(t, i, 1), t.take_along_dim(i), t.index_select(1, j),
                         flow.index_select(t, 0, j[:1]), t.index_select(-1, j[0])),
        lambda a, i, j: (np.take_along_axis(a, np.broadcast_to(i, (3, 5)), 1), a.reshape(-1)[i[0]],
                         a[:, j], a[j[:1]], a[:, j[:1]]),
        x, i, j,
    )  # fmt: skip


def test_unchecked_compiled_gather_clamps_out_of_range_indices(rng):
    """Without index checks (test_index_checks.py) the gather still never reads outside x."""
    x = data(rng, (4, 3))
    idx = np.array([[9, -2, 1]])
    fn = flow.jit(lambda t, i: (t.gather(0, i), t.index_select(0, i[0])), check_indices=False)
    got = fn(x, idx)
    clamped = np.clip(idx, 0, 3)
    np.testing.assert_array_equal(got[0].numpy(), np.take_along_axis(x, clamped, 0))
    np.testing.assert_array_equal(got[1].numpy(), x[clamped[0]])


GATHER_ERRORS = [
    (lambda t, i: t.gather(0, i[0]), ValueError, "gather: index must have the same rank as input"),
    (lambda t, i: t.gather(0, t), TypeError, "gather: expected an integer index tensor, got flow.float32"),
    (lambda t, i: t.gather(0, i.repeat(1, 3)), ValueError,
     r"expected index \[2, 6\] to be no larger than input \[3, 4\] apart from dim 0 \(dim 1\)"),
    (lambda t, i: t.gather(2, i), IndexError, "gather: dim 2 is out of range"),
    (lambda t, i: t.index_select(0, i), ValueError, r"index_select: expected a 0-D or 1-D index, got shape \[2, 2\]"),
    (lambda t, i: t.index_select(0, [5]), IndexError, "index 5 is out of bounds for dim 0 with size 3"),
    (lambda t, i: t.index_select(1, np.array([-1])), IndexError, "index -1 is out of bounds for dim 1"),
    (lambda t, i: flow.take_along_dim(t, i[0], 0), ValueError, "input and indices must have the same rank"),
]  # fmt: skip


@pytest.mark.parametrize("fn,cls,match", GATHER_ERRORS)
def test_gather_errors(rng, fn, cls, match):
    raises_both(fn, [data(rng, (3, 4)), np.array([[0, 1], [2, 0]])], cls, match)


def test_eager_gather_index_out_of_range():
    x = flow.tensor(np.zeros((3, 2), F32))
    with pytest.raises(IndexError, match="gather: index 3 is out of bounds for dim 0 with size 3"):
        x.gather(0, flow.tensor([[0, 3]]))
    with pytest.raises(IndexError, match="index -1 is out of bounds for dim 1 with size 2"):
        x.gather(1, flow.tensor([[-1]]))


# --------------------------------------------------------------------------- masked_fill


def test_masked_fill(rng):
    x = data(rng, (3, 4))
    m = data(rng, (3, 4), np.bool_)
    xi = data(rng, (2, 3), np.int32)
    check(
        lambda x, m, xi: (x.masked_fill(m, -1.5), flow.masked_fill(x, m[:1], 2),
                          xi.masked_fill(m[1:, 1:], 7.9), x.masked_fill(m[:, :1], x.sum()),
                          x.masked_fill(m[0], flow.tensor([3]).reshape(()))),
        lambda x, m, xi: (np.where(m, F32(-1.5), x), np.where(m[:1], F32(2), x),
                          np.where(m[1:, 1:], np.int32(7), xi), np.where(m[:, :1], x.sum(), x),
                          np.where(m[0], F32(3), x)),
        x, m, xi, rtol=1e-5, atol=1e-5,
    )  # fmt: skip


MASKED_FILL_ERRORS = [
    (lambda x, m: x.masked_fill(x, 0.0), TypeError, "masked_fill: expected a bool mask, got flow.float32"),
    (lambda x, m: x.masked_fill(m, x), ValueError, r"expected a 0-dim value tensor, got shape \[2, 3\]"),
    (lambda x, m: x.masked_fill(m, "a"), TypeError, "expected a number or a 0-dim tensor value, got str"),
    (lambda x, m: x.masked_fill(m.reshape(3, 2), 0.0), ValueError, "not broadcastable"),
]  # fmt: skip


@pytest.mark.parametrize("fn,cls,match", MASKED_FILL_ERRORS)
def test_masked_fill_errors(rng, fn, cls, match):
    raises_both(fn, [data(rng, (2, 3)), data(rng, (2, 3), np.bool_)], cls, match)


# --------------------------------------------------------------------------- one_hot


def test_one_hot(rng):
    i = rng.integers(0, 4, (2, 3))
    eye = np.eye(6, dtype=np.int64)
    check(lambda i: (flow.one_hot(i, 6), flow.one_hot(i[0, :0], 2)),
          lambda i: (eye[i], np.zeros((0, 2), np.int64)), i)  # fmt: skip
    t = flow.tensor(i)
    np.testing.assert_array_equal(flow.one_hot(t).numpy(), np.eye(i.max() + 1, dtype=np.int64)[i])


ONE_HOT_ERRORS = [
    (lambda i: flow.one_hot(i.float(), 3), TypeError, "one_hot: expected an integer class tensor"),
    (lambda i: flow.one_hot(i, -2), ValueError, "num_classes must be -1 or non-negative, got -2"),
    (lambda i: flow.one_hot(i, 1.5), TypeError, "expected an int num_classes"),
]  # fmt: skip


@pytest.mark.parametrize("fn,cls,match", ONE_HOT_ERRORS)
def test_one_hot_errors(fn, cls, match):
    raises_both(fn, [np.array([0, 2])], cls, match)


def test_one_hot_data_dependent_errors():
    with pytest.raises(
        ValueError, match="class values must be smaller than num_classes \\(2\\), got 2"
    ):
        flow.one_hot(flow.tensor([0, 2]), 2)
    with pytest.raises(ValueError, match="class values must be non-negative, got -1"):
        flow.one_hot(flow.tensor([-1, 0]), 3)
    with pytest.raises(ValueError, match="cannot infer num_classes from an empty tensor"):
        flow.one_hot(flow.tensor(np.zeros((0,), np.int64)))
    with pytest.raises(ValueError, match="unknown inside flow.jit; pass num_classes"):
        flow.jit(lambda i: flow.one_hot(i)).lower(np.array([0, 1]))


# --------------------------------------------------------------------------- pad


def test_pad_constant(rng):
    x = data(rng, (2, 3, 4))
    check(
        lambda t: (flow.pad(t, (1, 2)), flow.pad(t, (0, 1, 2, 0), value=-3.5),
                   flow.pad(t, (-1, 2, 1, -2, 0, 0)), flow.pad(t, (-2, -2)), flow.pad(t, ())),
        lambda a: (np.pad(a, [(0, 0), (0, 0), (1, 2)]),
                   np.pad(a, [(0, 0), (2, 0), (0, 1)], constant_values=-3.5),
                   np.pad(a, [(0, 0), (1, 0), (0, 2)])[:, :2, 1:], a[..., 2:2], a),
        x,
    )  # fmt: skip
    _eager_views(lambda t: (flow.pad(t, (1, -1)),), lambda v: (np.pad(v, [(0, 0), (1, 0)])[:, :-1],),
                 data(rng, (4, 6)))  # fmt: skip


def test_pad_int_bool(rng):
    xi, xb = data(rng, (2, 3), np.int32), data(rng, (3,), np.bool_)
    check(lambda xi, xb: (flow.pad(xi, (1, 1, 0, 2), value=7), flow.pad(xb, (2, 0), value=True)),
          lambda xi, xb: (np.pad(xi, [(0, 2), (1, 1)], constant_values=7),
                          np.pad(xb, [(2, 0)], constant_values=True)), xi, xb)  # fmt: skip


def test_pad_modes(rng):
    x = data(rng, (2, 3, 4))
    check(
        lambda t: (flow.pad(t, (3, 1, 2, 0), mode="reflect"),
                   flow.pad(t, (2, 3, 0, 1), mode="replicate"),
                   flow.pad(t, (4, 1, 1, 3), mode="circular"),
                   flow.pad(t, (0, 0, 1, 1, 1, 0), mode="replicate")),
        lambda a: (np.pad(a, [(0, 0), (2, 0), (3, 1)], mode="reflect"),
                   np.pad(a, [(0, 0), (0, 1), (2, 3)], mode="edge"),
                   np.pad(a, [(0, 0), (1, 3), (4, 1)], mode="wrap"),
                   np.pad(a, [(1, 0), (1, 1), (0, 0)], mode="edge")),
        x,
    )  # fmt: skip


PAD_ERRORS = [
    (lambda t: flow.pad(t, (1,)), ValueError, "padding length must be divisible by 2, got 1"),
    (lambda t: flow.pad(t, (1,) * 6), ValueError, r"padding length 6 is too large for an input of rank 2 \(at most 4\)"),
    (lambda t: flow.pad(t, (0, 0, -2, -2)), ValueError, r"padding \(-2, -2\) of dim 0 of size 3 gives a negative size"),
    (lambda t: flow.pad(t, (1, 1), mode="wrap"), ValueError, "mode must be one of constant, reflect, replicate, circular, got 'wrap'"),
    (lambda t: flow.pad(t, (4, 0), mode="reflect"), ValueError, r"reflect padding \(4, 0\) of dim 1 must be smaller than the size 4"),
    (lambda t: flow.pad(t, (5, 0), mode="circular"), ValueError, r"circular padding \(5, 0\) of dim 1 must be at most the size 4"),
    (lambda t: flow.pad(t, (-1, 0), mode="replicate"), ValueError, "replicate padding must be non-negative"),
    (lambda t: flow.pad(t, (1, 0), mode="reflect", value=1.0), ValueError, "padding mode 'reflect' doesn't take a value"),
    (lambda t: flow.pad(t, (1.0, 0)), TypeError, "expected an int padding"),
]  # fmt: skip


@pytest.mark.parametrize("fn,cls,match", PAD_ERRORS)
def test_pad_errors(rng, fn, cls, match):
    raises_both(fn, [data(rng, (3, 4))], cls, match)


def test_replicate_pad_of_empty_dim_is_an_error():
    with pytest.raises(
        ValueError, match=r"replicate padding \(1, 0\) of dim 1 must be applied to a non-empty dim"
    ):
        flow.pad(flow.tensor(np.zeros((2, 0), F32)), (1, 0), mode="replicate")


# --------------------------------------------------------------------------- embedding


def test_embedding(rng):
    w = data(rng, (10, 3))
    i = rng.integers(0, 10, (2, 4))
    check(
        lambda i, w: (flow.embedding(i, w), flow.embedding(i[0], w, padding_idx=0),
                      flow.embedding(i[:, :0], w)),
        lambda i, w: (w[i], w[i[0]], np.zeros((2, 0, 3), F32)),
        i, w,
    )  # fmt: skip


EMBEDDING_ERRORS = [
    (lambda i, w: flow.embedding(i, w[0]), ValueError, r"embedding: weight must be 2-D, got shape \[3\]"),
    (lambda i, w: flow.embedding(w, w), TypeError, "expected an integer input tensor"),
    (lambda i, w: flow.embedding(i, w, padding_idx=10), ValueError, r"padding_idx 10 must be within \[-10, 10\)"),
]  # fmt: skip


@pytest.mark.parametrize("fn,cls,match", EMBEDDING_ERRORS)
def test_embedding_errors(rng, fn, cls, match):
    raises_both(fn, [np.array([1, 2]), data(rng, (10, 3))], cls, match)


def test_embedding_eager_index_out_of_range(rng):
    w = flow.tensor(data(rng, (10, 3)))
    with pytest.raises(
        IndexError, match="embedding: index 10 is out of bounds for dim 0 with size 10"
    ):
        flow.embedding(flow.tensor([[1, 10]]), w)
