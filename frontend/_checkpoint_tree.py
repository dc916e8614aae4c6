"""The structure of a checkpoint: an object tree as JSON whose leaves name stored arrays.

`_Encoder` turns nested dicts/lists/tuples of tensors, arrays and Python scalars into a JSON
tree plus the arrays it references; `_Decoder` rebuilds the tree, checking every node. Both
storage formats (one safetensors file, OneFlow's directory layout) share them, so a
checkpoint never holds code: loading parses JSON and copies bytes.

A whole `nn.Module` is stored as a record: its class's import path, the arguments of its
constructor call (JSON data, tensors and other module records) and its `state_dict()`.
Loading builds it only from classes the caller allows (`flow._checkpoint_model`).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any, Callable

import numpy as np

from flow.core import dtypes as _dtypes
from flow.core.device import device as _device
from flow.core.tensor import Tensor
from flow.ops.basic import from_numpy

__all__ = ["CheckpointError"]

# numpy dtypes a bare numpy array may have; flow tensors are limited to _dtypes.ALL_DTYPES.
_ARRAY_DTYPES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "bfloat16", "float32", "float64"]
)  # fmt: skip
_TENSOR_DTYPES = frozenset(d.name for d in _dtypes.ALL_DTYPES)
_ARRAY_TAGS = ("tensor", "ndarray", "npscalar")
_DTYPES_BY_NAME = {d.name: d for d in _dtypes.ALL_DTYPES}


class CheckpointError(ValueError):
    """A checkpoint that is truncated, corrupted or not what `flow.save` wrote."""


def _where(path: str) -> str:
    return f"at '{path}'" if path else "at the top level"


def _join(path: str, key: str | int) -> str:
    return f"{path}.{key}" if path else str(key)


def _type_name(obj: object) -> str:
    kind = type(obj)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


# ---------------------------------------------------------------------------- save


class _Encoder:
    """Turns an object tree into a JSON tree plus the arrays it references.

    `global_array(tensor, path)` gives the whole value of a global tensor (None: this rank
    stores nothing). Storage formats name arrays through `_fresh_name` and may follow the
    nesting through `_enter` / `_leave`.
    """

    def __init__(self, global_array: Callable[[Tensor, str], np.ndarray | None] | None = None):
        self.arrays: dict[str, np.ndarray] = {}
        # id(tensor or array) -> stored name, so tied weights stay one tensor.
        self._names: dict[int, str] = {}
        self._active: set[int] = set()
        self._global_array = global_array
        self._in_args = 0  # > 0 while encoding a module's constructor arguments

    def encode(self, obj: Any, path: str) -> Any:
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, Tensor):
            if obj.is_traced:
                raise TypeError(
                    f"flow.save: cannot save a traced tensor {_where(path)}; "
                    "save concrete tensors outside flow.jit"
                )
            if obj.is_global and self._global_array is not None:
                arr = self._global_array(obj, path)
            else:
                arr = obj.numpy()
            return self._array("tensor", obj, arr, path)
        if isinstance(obj, np.ndarray):
            return self._array("ndarray", obj, obj, path)
        if isinstance(obj, np.generic):
            return self._array("npscalar", obj, np.asarray(obj), path)
        if isinstance(obj, int):
            return int(obj)
        if isinstance(obj, float):
            return float(obj) if math.isfinite(obj) else {"float": repr(float(obj))}
        if isinstance(obj, (dict, list, tuple)):
            if id(obj) in self._active:
                raise TypeError(f"flow.save: circular reference {_where(path)}")
            self._active.add(id(obj))
            try:
                return self._container(obj, path)
            finally:
                self._active.discard(id(obj))
        if self._in_args and isinstance(obj, _dtypes.dtype):
            return {"flow_dtype": obj.name}
        if self._in_args and isinstance(obj, _device):
            return {"flow_device": str(obj)}
        from flow._checkpoint_model import encode_module, is_module

        if is_module(obj):
            return encode_module(self, obj, path)
        hint = (
            f"; save its state_dict() instead (flow.load returns it for load_state_dict)"
            if callable(getattr(obj, "state_dict", None))
            else ""
        )
        raise TypeError(
            f"flow.save: cannot save {_type_name(obj)} {_where(path)}; checkpoints hold "
            "tensors, numpy arrays, dicts, lists, tuples, int/float/bool/str/None and whole "
            f"nn.Modules{hint}"
        )

    def encode_args(self, obj: Any, path: str) -> Any:
        """Encode a module's constructor arguments (dtypes and devices allowed too)."""
        self._in_args += 1
        try:
            return self.encode(obj, path)
        finally:
            self._in_args -= 1

    def _container(self, obj: dict | list | tuple, path: str) -> Any:
        if isinstance(obj, dict):
            items = []
            for key, value in obj.items():
                if isinstance(key, bool) or not isinstance(key, (str, int)):
                    raise TypeError(
                        f"flow.save: dict key {key!r} of type {type(key).__name__} "
                        f"{_where(path)}; keys must be str or int"
                    )
                key = str(key) if isinstance(key, str) else int(key)
                token = self._enter(key)
                try:
                    items.append([key, self.encode(value, _join(path, key))])
                finally:
                    self._leave(token)
            return {"odict" if isinstance(obj, OrderedDict) else "dict": items}
        values = []
        for i, v in enumerate(obj):
            token = self._enter(i)
            try:
                values.append(self.encode(v, _join(path, i)))
            finally:
                self._leave(token)
        return {"tuple": values} if isinstance(obj, tuple) else values

    def _enter(self, key: str | int) -> Any:
        """Hook: the encoder descends into `key` (returns what `_leave` gets back)."""
        return None

    def _leave(self, token: Any) -> None:
        """Hook: the encoder is back from the key `_enter` returned `token` for."""

    def _array(self, tag: str, owner: object, arr: np.ndarray | None, path: str) -> dict:
        if arr is None:  # a global tensor that another rank stores
            dtype, shape = owner.dtype.name, list(owner.shape)
            return {tag: self._names.setdefault(id(owner), path), "dtype": dtype, "shape": shape}
        if arr.dtype.name not in _ARRAY_DTYPES:
            raise TypeError(
                f"flow.save: array {_where(path)} has unsupported dtype {arr.dtype}; "
                f"supported: {', '.join(sorted(_ARRAY_DTYPES))}"
            )
        name = self._names.get(id(owner))
        if name is None:
            name = self._fresh_name(path)
            self._names[id(owner)] = name
            # raw bytes are written as they are in memory: C-contiguous little-endian.
            self.arrays[name] = arr.astype(arr.dtype.newbyteorder("<"), order="C", copy=False)
        return {tag: name, "dtype": arr.dtype.name, "shape": list(arr.shape)}

    def _fresh_name(self, path: str) -> str:
        base = path or "tensor"
        name, n = base, 1
        while name in self.arrays or name == "__metadata__":
            name, n = f"{base}#{n}", n + 1
        return name


# ---------------------------------------------------------------------------- load


class _Decoder:
    """Rebuilds the object tree from the JSON tree and the stored arrays, checking both.

    `fetch(name, path)` returns the stored array `name` (checked; `path` names the entry in
    errors); `make_tensor(array, node)` makes the tensor of a "tensor" leaf. Module records
    are built only from classes that `allowed` admits (see `flow._checkpoint_model`).
    """

    def __init__(self, source: str, fetch: Callable[[str, str], np.ndarray],
                 names: set[str], allowed: set[str] | None = None,
                 make_tensor: Callable[[np.ndarray], Tensor] = from_numpy) -> None:  # fmt: skip
        self.source = source
        self.fetch = fetch
        self.names = names
        self.allowed = allowed if allowed is not None else set()
        self.make_tensor = make_tensor
        self.used: dict[tuple[str, str], Any] = {}

    def fail(self, path: str, what: str) -> CheckpointError:
        return CheckpointError(f"{self.source}: corrupted checkpoint {_where(path)}: {what}")

    def decode(self, node: Any, path: str) -> Any:
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.decode(v, _join(path, i)) for i, v in enumerate(node)]
        if not isinstance(node, dict) or len(node) == 0:
            raise self.fail(path, f"unexpected node {node!r:.80}")
        if len(node) == 1:
            (tag, value), = node.items()  # fmt: skip
            if tag in ("dict", "odict"):
                return self._dict(value, path, OrderedDict if tag == "odict" else dict)
            if tag == "tuple" and isinstance(value, list):
                return tuple(self.decode(v, _join(path, i)) for i, v in enumerate(value))
            if tag == "float" and value in ("nan", "inf", "-inf"):
                return float(value)
            if tag == "flow_dtype" and value in _DTYPES_BY_NAME:
                return _DTYPES_BY_NAME[value]
            if tag == "flow_device" and isinstance(value, str):
                try:
                    return _device(value)
                except (TypeError, ValueError) as err:
                    raise self.fail(path, f"bad device {value!r:.40} ({err})") from None
            if tag == "module" and isinstance(value, dict):
                from flow._checkpoint_model import decode_module

                return decode_module(self, value, path)
        tags = [t for t in _ARRAY_TAGS if t in node]
        if len(tags) == 1 and set(node) == {tags[0], "dtype", "shape"}:
            return self._array(tags[0], node, path)
        raise self.fail(path, f"unexpected node {node!r:.80}")

    def _dict(self, items: Any, path: str, kind: type) -> dict:
        if not isinstance(items, list):
            raise self.fail(path, "dict node is not a list of [key, value] pairs")
        out = kind()
        for item in items:
            ok = isinstance(item, list) and len(item) == 2
            key = item[0] if ok else None
            if not ok or isinstance(key, bool) or not isinstance(key, (str, int)):
                raise self.fail(path, f"bad dict entry {item!r:.80}")
            if key in out:
                raise self.fail(path, f"duplicate dict key {key!r}")
            out[key] = self.decode(item[1], _join(path, key))
        return out

    def _array(self, tag: str, node: dict, path: str) -> Any:
        name, dtype, shape = node[tag], node["dtype"], node["shape"]
        if not isinstance(name, str) or name not in self.names:
            raise self.fail(
                path, f"reference to tensor {name!r:.80}, which the checkpoint does not hold"
            )
        allowed = _TENSOR_DTYPES if tag == "tensor" else _ARRAY_DTYPES
        if not isinstance(dtype, str) or dtype not in allowed:
            raise self.fail(path, f"unsupported dtype {dtype!r:.40} for a {tag}")
        if (tag, name) in self.used:
            return self.used[tag, name]
        arr = self.fetch(name, path)
        if arr.dtype.name != dtype or list(arr.shape) != shape:
            raise self.fail(
                path,
                f"tensor {name!r} is stored as {arr.dtype.name}{list(arr.shape)} "
                f"but the tree expects {dtype}{shape!r:.80}",
            )
        if tag == "npscalar" and arr.ndim != 0:
            raise self.fail(path, f"numpy scalar {name!r} is not 0-d")
        value = arr[()] if tag == "npscalar" else arr
        self.used[tag, name] = self.make_tensor(value) if tag == "tensor" else value
        return self.used[tag, name]

    def check_all_used(self) -> None:
        unused = sorted(self.names - {name for _, name in self.used})
        if unused:
            raise CheckpointError(
                f"{self.source}: corrupted checkpoint: tensors not referenced by the structure: "
                f"{', '.join(map(repr, unused[:5]))}{' ...' if len(unused) > 5 else ''}"
            )
