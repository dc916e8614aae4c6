"""`default_collate` (samples -> batch) and `default_convert` (one sample, no batching).

PyTorch's rules: tensors and numpy arrays are stacked along a new dim 0, Python
ints become int64, floats float64 and bools bool tensors, strings stay lists,
and tuples, lists, dicts and namedtuples are collated field by field (a tuple
becomes a list, as in PyTorch). Numpy dtypes flow has no tensor type for are
widened to the narrowest signed type that holds them (uint8 -> int32).
"""

from __future__ import annotations

import collections.abc
from collections.abc import Sequence
from typing import Any

import numpy as np

from flow.core.tensor import Tensor
from flow.ops.basic import from_numpy

_WIDER = {np.dtype(np.uint8): np.int32, np.dtype(np.int16): np.int32,
          np.dtype(np.uint16): np.int32, np.dtype(np.uint32): np.int64}  # fmt: skip

_COLLATE_ERROR = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)


def _is_text_array(arr: np.ndarray) -> bool:
    return arr.dtype.kind in "SUO"


def as_flow_tensor(arr: np.ndarray) -> Tensor:
    """`flow.from_numpy(arr)`, widening dtypes flow lacks (see the module docstring)."""
    wider = _WIDER.get(arr.dtype)
    if wider is not None:
        arr = arr.astype(wider)
    try:
        return from_numpy(arr)
    except TypeError as err:
        raise TypeError(f"default_collate: numpy arrays of dtype {arr.dtype} have no flow "
                        f"tensor type ({err})") from None  # fmt: skip


def _stack(arrays: Sequence[np.ndarray]) -> Tensor:
    """The arrays stacked along a new dim 0, as one tensor; shapes must agree."""
    for i, a in enumerate(arrays):
        if a.shape != arrays[0].shape:
            raise RuntimeError(f"default_collate: stack expects each tensor to be equal size, "
                               f"but got {list(arrays[0].shape)} at entry 0 and {list(a.shape)} "
                               f"at entry {i}")  # fmt: skip
    return as_flow_tensor(np.stack(arrays))


def _numbers(batch: Sequence[Any]) -> Tensor:
    arr = np.array(batch)
    kind = {"b": np.bool_, "i": np.int64, "f": np.float64}.get(arr.dtype.kind)
    if kind is None:
        raise TypeError(_COLLATE_ERROR.format(arr.dtype))
    return from_numpy(arr.astype(kind, copy=False))


def default_collate(batch: Sequence[Any]) -> Any:
    """Merge a list of samples into a batch (see the module docstring for the rules)."""
    elem = batch[0]
    elem_type = type(elem)
    if isinstance(elem, Tensor):
        return _stack([t.numpy() for t in batch])
    if isinstance(elem, np.ndarray):
        if _is_text_array(elem):
            raise TypeError(_COLLATE_ERROR.format(elem.dtype))
        return _stack(batch)
    if isinstance(elem, np.generic) and not isinstance(elem, (np.str_, np.bytes_)):
        return as_flow_tensor(np.array(batch))
    if isinstance(elem, (bool, int, float)):
        return _numbers(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        fields = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return elem_type(fields)
        except TypeError:  # a mapping type that cannot be built from a dict
            return fields
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("default_collate: each element in list of batch should be of "
                               "equal size")  # fmt: skip
        fields = [default_collate(list(s)) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return fields
        try:
            return elem_type(fields)
        except TypeError:
            return fields
    raise TypeError(_COLLATE_ERROR.format(elem_type))


def default_convert(data: Any) -> Any:
    """Turn the numpy arrays in one sample into flow tensors, keeping its structure; what
    a `DataLoader` with `batch_size=None` applies to each sample."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray):
        return data if _is_text_array(data) else as_flow_tensor(data)
    if isinstance(data, np.generic) and not isinstance(data, (np.str_, np.bytes_)):
        return as_flow_tensor(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        fields = {key: default_convert(v) for key, v in data.items()}
        try:
            return type(data)(fields)
        except TypeError:
            return fields
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
