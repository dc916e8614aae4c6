"""Gathering ops: `gather`, `take_along_dim`, `index_select`, `embedding` and `one_hot`
(PyTorch / OneFlow semantics), built on the `gather` primitive and `iota` comparisons.

Static indices are range-checked here; indices known only inside `flow.jit` are checked
after the call (ops/index_checks.py). `one_hot` without `num_classes` takes the class
count from the data, so it works eagerly only.
"""

from __future__ import annotations

from flow import primitives as P
from flow.core import dtypes as _dtypes
from flow.core.function import Function
from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.modes import lazy as _lazy
from flow.ops import basic as O
from flow.ops import index_checks as checks
from flow.ops.indexing import _as_index, _check_in_range, _concrete, _index_tensor, _int, _take
from flow.primitives.registry import bind


def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    """`out[i][j] = input[index[i][j]][j]` for dim 0 (torch.gather)."""
    x, idx = O.as_tensor(input), _index_tensor("gather", index)
    if idx.ndim != x.ndim:
        raise op_error(
            "gather",
            f"index must have the same rank as input, got index of shape "
            f"{list(idx.shape)} and input of shape {list(x.shape)}",
        )
    d = O.normalize_dim("gather", dim, x.ndim)
    for j in range(x.ndim):
        if j != d and idx.shape[j] > x.shape[j]:
            raise op_error(
                "gather",
                f"expected index {list(idx.shape)} to be no larger than "
                f"input {list(x.shape)} apart from dim {d} (dim {j})",
            )
    if idx._buf.__class__ is _lazy.LazyValue and idx._buf.value is None:
        # flow.lazy() with a pending index: compute it to check it here, as eager does
        _check_in_range("gather", idx.numpy(), x.shape[d] if x.ndim else 1, d,
                        negative_ok=False)  # fmt: skip
    if x.ndim == 0:
        checks.check_bounds("gather", idx, 1, 0, negative_ok=False)
        return O.reshape(bind(P.gather, O.reshape(x, 1), O.reshape(idx, 1), dim=0))
    checks.check_bounds("gather", idx, x.shape[d], d, negative_ok=False)
    return bind(P.gather, x, idx, dim=d)


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """Gather along `dim` after broadcasting input and indices in the other dims; with no dim,
    over the flattened tensors."""
    x, idx = O.as_tensor(input), _index_tensor("take_along_dim", indices, "indices")
    if dim is None:
        return gather(O.flatten(x), 0, O.flatten(idx))
    if idx.ndim != x.ndim:
        raise op_error(
            "take_along_dim",
            f"input and indices must have the same rank, got {x.ndim} and {idx.ndim}",
        )
    d = O.normalize_dim("take_along_dim", dim, x.ndim)
    xs, js = list(x.shape), list(idx.shape)
    xs[d], js[d] = 1, 1
    common = O.broadcast_shapes("take_along_dim", xs, js)
    x = O.broadcast_to(x, [x.shape[d] if j == d else s for j, s in enumerate(common)])
    idx = O.broadcast_to(idx, [idx.shape[d] if j == d else s for j, s in enumerate(common)])
    return gather(x, d, idx)


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """The entries `index` (a 1-D integer tensor) of dim `dim`, in that order."""
    values = _concrete(index)
    x, idx = O.as_tensor(input), _index_tensor("index_select", index)
    if idx.ndim > 1:
        raise op_error("index_select", f"expected a 0-D or 1-D index, got shape {list(idx.shape)}")
    if x.ndim == 0:
        return O.reshape(index_select(O.reshape(x, 1), 0, idx), *idx.shape)
    d = O.normalize_dim("index_select", dim, x.ndim)
    if values is not None:
        _check_in_range("index_select", values, x.shape[d], d, negative_ok=False)
    elif x.shape[d] == 0 and idx.numel():
        raise op_error("index_select", f"cannot select from dim {d} of size 0", cls=IndexError)
    else:
        checks.check_bounds("index_select", idx, x.shape[d], d, negative_ok=False)
    return _take(x, d, O.reshape(_as_index(idx, x.shape[d]), idx.numel()))


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """Rows of `weight` (num_embeddings x dim) at the integer `input`: shape input.shape + [dim].

    `padding_idx` only changes training (its row gets no gradient); the lookup is the same.
    """
    values = _concrete(input)
    idx, w = _index_tensor("embedding", input, "input"), O.as_tensor(weight)
    if w.ndim != 2:
        raise op_error("embedding", f"weight must be 2-D, got shape {list(w.shape)}")
    num = w.shape[0]
    if padding_idx is not None and not -num <= _int("embedding", "padding_idx", padding_idx) < num:
        raise op_error(
            "embedding",
            f"padding_idx {padding_idx} must be within [-{num}, {num}) (num_embeddings)",
        )
    if values is not None:
        _check_in_range("embedding", values, num, 0, negative_ok=False)
    elif num == 0 and idx.numel():
        raise op_error("embedding", "cannot look up in an empty weight", cls=IndexError)
    else:
        checks.check_bounds("embedding", idx, num, 0, negative_ok=False)
    flat = O.reshape(_as_index(idx, num), idx.numel())
    pad_row = None if padding_idx is None else int(padding_idx) % num
    rows = _Lookup.apply(w, flat, pad_row) if w.requires_grad else _take(w, 0, flat)
    return O.reshape(rows, *idx.shape, w.shape[1])


class _Lookup(Function):
    """Row lookup whose backward is one matmul, onehot(ids)^T @ grad (not a gather VJP
    over every embedding dim); the padding row gets no gradient, like PyTorch."""

    @staticmethod
    def forward(ctx, weight, ids, pad_row):
        ctx.save_for_backward(ids)
        ctx.num, ctx.pad_row = weight.shape[0], pad_row
        return _take(weight, 0, ids)

    @staticmethod
    def backward(ctx, grad):
        (ids,) = ctx.saved_tensors
        hits_shape = (ctx.num, ids.shape[0])
        rows = bind(P.iota, dim=0, shape=hits_shape, dtype=_dtypes.int64)
        ids_b = bind(P.broadcast_in_dim, ids, dims=(1,), shape=hits_shape)
        hits = bind(P.compare, rows, ids_b, direction="eq")
        if ctx.pad_row is not None:
            hits = O.where(O.ne(rows, ctx.pad_row), hits, False)
        return O.matmul(O.to(hits, grad.dtype), grad), None, None


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 tensor of shape `tensor.shape + [num_classes]` with 1 at each class index.

    `num_classes=-1` takes max + 1 from the data, so it works eagerly only; inside
    `flow.jit`, out-of-range classes raise after the call (ops/index_checks.py).
    """
    values = _concrete(tensor)
    x = _index_tensor("one_hot", tensor, "class")
    num_classes = _int("one_hot", "num_classes", num_classes)
    if num_classes == -1:
        if values is None:
            raise op_error(
                "one_hot",
                "num_classes=-1 takes the class count from the data, "
                "which is unknown inside flow.jit; pass num_classes",
            )
        if values.size == 0:
            raise op_error("one_hot", "cannot infer num_classes from an empty tensor")
        num_classes = int(values.max()) + 1
    if num_classes < 0:
        raise op_error("one_hot", f"num_classes must be -1 or non-negative, got {num_classes}")
    if values is not None and values.size:
        if values.min() < 0:
            raise op_error("one_hot", f"class values must be non-negative, got {values.min()}")
        if values.max() >= num_classes:
            raise op_error(
                "one_hot",
                f"class values must be smaller than num_classes "
                f"({num_classes}), got {values.max()}",
            )
    elif values is None:
        checks.check_classes("one_hot", x, num_classes)
    shape = (*x.shape, num_classes)
    classes = bind(P.iota, dim=len(shape) - 1, shape=shape, dtype=_dtypes.int64)
    wide = O.broadcast_to(O.unsqueeze(O.to(x, _dtypes.int64), -1), shape)
    return O.to(O.eq(wide, classes), _dtypes.int64)


TENSOR_METHODS: dict = {
    "gather": gather,
    "index_select": index_select,
    "take_along_dim": take_along_dim,
}
"""Tensor methods this module adds (name -> function taking the tensor first)."""

__all__ = ["gather", "take_along_dim", "index_select", "one_hot", "embedding"]
