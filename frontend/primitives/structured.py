"""Structured primitives: matmul, reductions, reshape / transpose / broadcast, constants.

Each is a numpy kernel registered against its dialect op (dialect/ops.py, lowered by
lowering/_structured.py), with its VJP rule beside it (the creation primitives have none:
they take no tensor).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

import numpy as np

from flow.core import dtypes as _dtypes
from flow.primitives.elementwise import _cmp, _div, _like, _mul, _sel, and_
from flow.primitives.registry import bind, composite, primitive


# OpenBLAS runs a GEMM on one thread below m * n * k = 2**18 and hands larger ones to its
# thread pool. Up to a few times that, the hand-off gains little, and where the cores are
# shared it can stall for milliseconds (a thread waits for a core): such GEMMs run as one
# single-threaded call (`_blas_threads`).
_ONE_THREAD_MNK, _SPLIT_MNK = 1 << 18, 1 << 22


def host_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`np.matmul(a, b)`; a mid-sized float GEMM on one BLAS thread (see `_ONE_THREAD_MNK`).
    The result agrees to rounding: how BLAS blocks a product depends on its thread count
    anyway."""
    if a.ndim != 2 or b.ndim != 2 or a.dtype != b.dtype or a.dtype.char not in "fd":
        return np.matmul(a, b)
    if not _ONE_THREAD_MNK < a.shape[0] * a.shape[1] * b.shape[1] <= _SPLIT_MNK:
        return np.matmul(a, b)
    threads = _blas_threads()
    if threads is None:
        return np.matmul(a, b)
    get, set_ = threads
    before = get()
    set_(1)
    try:
        return np.matmul(a, b)
    finally:
        set_(before)


@functools.cache
def _blas_threads() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """The get / set thread-count functions of the OpenBLAS that numpy links (numpy's wheels
    bundle it as `scipy_openblas`), or None when numpy links another BLAS. Setting the count
    only changes how many of OpenBLAS's threads the next call uses (~1 us)."""
    import ctypes
    import glob

    libs = sorted(glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs",
                                         "*openblas*.so*")))  # fmt: skip
    for path in [*libs, None]:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (("scipy_", "64_"), ("scipy_", ""), ("", "64_"), ("", "")):
            get = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
            set_ = getattr(lib, f"{prefix}openblas_set_num_threads{suffix}", None)
            if get is not None and set_ is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                set_.restype, set_.argtypes = None, [ctypes.c_int]
                return get, set_
    return None


@primitive("matmul", "MatmulOp")
def matmul(a, b):
    return host_matmul(a, b)


def _swap_last(t):
    perm = list(range(len(t.shape)))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return bind(transpose, t, permutation=tuple(perm))


def _column_major(t) -> bool:
    """Whether `t` is an eager matrix laid out column-major (a transposed view, as linear
    layers read their weight)."""
    b = t._buf
    return (b.__class__ is np.ndarray and b.ndim == 2 and b.flags.f_contiguous
            and not b.flags.c_contiguous)  # fmt: skip


def _matmul_vjp(ct, a, b, out):
    """`ct @ b^T` and `a^T @ ct`, each only when that operand needs it. An eager column-major
    operand gets its cotangent column-major, computed as the transpose of the product the
    other way round (`(ct^T @ a)^T`): what a transposed weight's gradient becomes after its
    transpose's own rule is then row-major like the weight, which later elementwise
    updates read at full speed."""
    ga = gb = None
    if a._requires_grad:
        if _column_major(a):
            ga = bind(_matmul_t, b, ct, ta=False, tb=True, tout=True)
        else:
            ga = bind(_matmul_t, ct, b, ta=False, tb=True, tout=False)
    if b._requires_grad:
        if _column_major(b):
            gb = bind(_matmul_t, ct, a, ta=True, tb=False, tout=True)
        else:
            gb = bind(_matmul_t, a, ct, ta=True, tb=False, tout=False)
    return ga, gb


def _matmul_t_parts(a, b, *, ta, tb, tout):
    out = bind(matmul, _swap_last(a) if ta else a, _swap_last(b) if tb else b)
    return _swap_last(out) if tout else out


@composite("matmul_t", _matmul_t_parts)
def _matmul_t(a, b, *, ta, tb, tout):
    """`matmul` with an operand, or the result, transposed in its last two dims (the
    products of a VJP) as one eager op: the transposes are the numpy views their own
    kernels give."""
    out = host_matmul(a.swapaxes(-1, -2) if ta else a, b.swapaxes(-1, -2) if tb else b)
    if out.dtype != a.dtype:  # numpy multiplies bfloat16 in float32: rounded as `matmul` is
        out = out.astype(a.dtype)
    return out.swapaxes(-1, -2) if tout else out


matmul.vjp = _matmul_vjp


_REDUCE = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


@primitive("reduce", "ReduceOp")
def reduce(x, *, kind, dims):
    if not dims:
        return x
    return _REDUCE[kind].reduce(x, axis=tuple(dims), dtype=x.dtype)


def _expand_back(ct, x, dims):
    """Broadcast a reduction's cotangent (dims removed) back to `x`'s shape."""
    kept = tuple(i for i in range(len(x.shape)) if i not in dims)
    return bind(broadcast_in_dim, ct, dims=kept, shape=tuple(x.shape))


def _reduce_vjp(ct, x, out, *, kind, dims):
    dims = tuple(dims)
    if not dims:
        return (ct,)
    ct_b = _expand_back(ct, x, dims)
    if kind == "sum":
        return (ct_b,)
    if kind in ("max", "min"):
        hit = _sel(_cmp(x, _expand_back(out, x, dims), "eq"), _like(x, 1), _like(x, 0))
        count = _expand_back(bind(reduce, hit, kind="sum", dims=dims), x, dims)
        return (_div(_mul(ct_b, hit), count),)
    # prod: d/dx_i = product of the others, exact when some x are zero
    zero = _cmp(x, _like(x, 0), "eq")
    nonzero = _sel(zero, _like(x, 1), x)
    p = _expand_back(bind(reduce, nonzero, kind="prod", dims=dims), x, dims)
    zeros = _expand_back(bind(reduce, _sel(zero, _like(x, 1), _like(x, 0)), kind="sum",
                              dims=dims), x, dims)  # fmt: skip
    none_zero = _cmp(zeros, _like(x, 0), "eq")
    one_zero = _cmp(zeros, _like(x, 1), "eq")
    g = _sel(none_zero, _div(p, nonzero), _sel(bind(and_, one_zero, zero), p, _like(x, 0)))
    return (_mul(ct_b, g),)


reduce.vjp = _reduce_vjp


@primitive("reshape", "ReshapeOp", quiet=True)
def reshape(x, *, shape):
    return x.reshape(shape)


reshape.vjp = lambda ct, x, out, shape: (bind(reshape, ct, shape=tuple(x.shape)),)


@primitive("transpose", "TransposeOp", quiet=True)
def transpose(x, *, permutation):
    return np.transpose(x, permutation)


def _transpose_vjp(ct, x, out, *, permutation):
    inverse = [0] * len(permutation)
    for i, p in enumerate(permutation):
        inverse[p] = i
    return (bind(transpose, ct, permutation=tuple(inverse)),)


transpose.vjp = _transpose_vjp


@primitive("broadcast_in_dim", "BroadcastInDimOp", quiet=True)
def broadcast_in_dim(x, *, dims, shape):
    expanded = [1] * len(shape)
    for i, d in enumerate(dims):
        expanded[d] = x.shape[i]
    return np.broadcast_to(x.reshape(expanded), shape)


def _broadcast_vjp(ct, x, out, *, dims, shape):
    summed = [d for d in range(len(shape)) if d not in dims]
    summed += [d for i, d in enumerate(dims) if x.shape[i] == 1 and shape[d] != 1]
    r = bind(reduce, ct, kind="sum", dims=tuple(sorted(summed))) if summed else ct
    return (bind(reshape, r, shape=tuple(x.shape)) if tuple(r.shape) != tuple(x.shape) else r,)


broadcast_in_dim.vjp = _broadcast_vjp


# --------------------------------------------------------------------------- creation


@primitive(
    "iota",
    "IotaOp",
    to_ir=lambda p: {
        "dim": p["dim"],
        "shape": tuple(p["shape"]),
        "element_type": p["dtype"].ir_type,
    },
)
def iota(*, dim, shape, dtype):
    idx = np.arange(shape[dim], dtype=dtype.np_dtype)
    view = [1] * len(shape)
    view[dim] = shape[dim]
    return np.broadcast_to(idx.reshape(view), shape)


def scalar_attr(value, dtype: _dtypes.dtype):
    """`value` as a typed attribute of `dtype` (how flow.full and flow.pad carry scalars)."""
    from xdsl.dialects.builtin import FloatAttr, IntegerAttr

    if dtype.is_floating_point:
        return FloatAttr(float(value), dtype.ir_type)
    return IntegerAttr(int(bool(value)) if dtype is _dtypes.bool_ else int(value), dtype.ir_type)


@primitive("optimization_barrier", "OptimizationBarrierOp", quiet=True)
def optimization_barrier(value, dep):
    """`value` itself; compiled, a barrier tying it to `dep` (see the dialect op)."""
    return value


optimization_barrier.vjp = lambda ct, value, dep, out: (ct, None)


def _full_to_ir(p: dict) -> dict:
    return {"value": scalar_attr(p["value"], p["dtype"]), "shape": tuple(p["shape"])}


@primitive("full", "FullOp", to_ir=_full_to_ir)
def full(*, value, shape, dtype):
    return np.full(shape, value, dtype=dtype.np_dtype)


def _constant_to_ir(p: dict) -> dict:
    from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType

    arr: np.ndarray = p["array"]
    dt = _dtypes.as_dtype(arr.dtype)
    ty = TensorType(dt.ir_type, arr.shape)
    values = arr.reshape(-1).tolist()
    if dt is _dtypes.bool_:
        values = [int(v) for v in values]
    return {"value": DenseIntOrFPElementsAttr.from_list(ty, values)}


@primitive("constant", "ConstantOp", to_ir=_constant_to_ir)
def constant(*, array):
    return array


__all__ = ["broadcast_in_dim", "constant", "full", "iota", "matmul", "optimization_barrier", "reduce",
           "reshape", "transpose"]  # fmt: skip
