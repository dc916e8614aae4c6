"""`flow.save` / `flow.load`: checkpoints as one safetensors file, never pickle.

Tensors go into the safetensors body; the nesting around them (dicts, lists,
tuples, Python scalars) goes into the header's `__metadata__` as a JSON tree
whose leaves name the stored tensors. Loading therefore only parses JSON and
copies bytes, so an untrusted checkpoint cannot run code, and every file is a
plain safetensors file that other tools can read.

A save streams the file (header, then each tensor's bytes from its own array: no copy of
the state in memory) into a temp file named with the writer's pid, then renames it over
the target; a later save to the same path removes temps whose writer died mid-write.
The header records a SHA-256 of the whole file (format version 2), so any changed byte,
in a tensor, the structure or a scalar, fails the load; version 1 files (whose checksum
covers the tensor data only) still load.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import secrets
import struct
import time
from typing import Any

import numpy as np
import safetensors

from flow.core import dtypes as _dtypes
from flow.core.tensor import Tensor
from flow.ops.basic import from_numpy

__all__ = ["CheckpointError", "load", "save"]

FORMAT_VERSION = 2  # 2: the checksum covers the whole file; 1 (older flow): tensor data only
_VERSION_KEY = "flow.format_version"
_TREE_KEY = "flow.tree"
_DIGEST_KEY = "flow.sha256"
_NO_DIGEST = "0" * 64  # the digest's bytes while hashing (it cannot cover itself)
_CHUNK = 1 << 22
# numpy dtype name -> safetensors dtype name
_ST_DTYPES = {"bool": "BOOL", "uint8": "U8", "int8": "I8", "int16": "I16", "uint16": "U16",
              "int32": "I32", "uint32": "U32", "int64": "I64", "uint64": "U64",
              "float16": "F16", "bfloat16": "BF16", "float32": "F32", "float64": "F64"}  # fmt: skip

# numpy dtypes a bare numpy array may have; flow tensors are limited to _dtypes.ALL_DTYPES.
_ARRAY_DTYPES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "bfloat16", "float32", "float64"]
)  # fmt: skip
_TENSOR_DTYPES = frozenset(d.name for d in _dtypes.ALL_DTYPES)
_ARRAY_TAGS = ("tensor", "ndarray", "npscalar")


class CheckpointError(ValueError):
    """A checkpoint file that is truncated, corrupted or not what `flow.save` wrote."""


def _where(path: str) -> str:
    return f"at '{path}'" if path else "at the top level"


def _join(path: str, key: str | int) -> str:
    return f"{path}.{key}" if path else str(key)


# ---------------------------------------------------------------------------- save


class _Encoder:
    """Turns an object tree into a JSON tree plus the arrays it references."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        # id(tensor or array) -> stored name, so tied weights stay one tensor.
        self._names: dict[int, str] = {}
        self._active: set[int] = set()

    def encode(self, obj: Any, path: str) -> Any:
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, Tensor):
            if obj.is_traced:
                raise TypeError(
                    f"flow.save: cannot save a traced tensor {_where(path)}; "
                    "save concrete tensors outside flow.jit"
                )
            return self._array("tensor", obj, obj.numpy(), path)
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
        kind = type(obj)
        name = (
            kind.__qualname__
            if kind.__module__ == "builtins"
            else f"{kind.__module__}.{kind.__qualname__}"
        )
        raise TypeError(
            f"flow.save: cannot save {name} {_where(path)}; checkpoints hold tensors, "
            "numpy arrays, dicts, lists, tuples and int/float/bool/str/None"
        )

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
                items.append([key, self.encode(value, _join(path, key))])
            return {"dict": items}
        values = [self.encode(v, _join(path, i)) for i, v in enumerate(obj)]
        return {"tuple": values} if isinstance(obj, tuple) else values

    def _array(self, tag: str, owner: object, arr: np.ndarray, path: str) -> dict:
        if arr.dtype.name not in _ARRAY_DTYPES:
            raise TypeError(
                f"flow.save: array {_where(path)} has unsupported dtype {arr.dtype}; "
                f"supported: {', '.join(sorted(_ARRAY_DTYPES))}"
            )
        name = self._names.get(id(owner))
        if name is None:
            name = self._fresh_name(path)
            self._names[id(owner)] = name
            # safetensors copies raw memory: give it C-contiguous little-endian bytes.
            self.arrays[name] = arr.astype(arr.dtype.newbyteorder("<"), order="C", copy=False)
        return {tag: name, "dtype": arr.dtype.name, "shape": list(arr.shape)}

    def _fresh_name(self, path: str) -> str:
        base = path or "tensor"
        name, n = base, 1
        while name in self.arrays or name == "__metadata__":
            name, n = f"{base}#{n}", n + 1
        return name


def save(obj: Any, path: str | os.PathLike[str]) -> None:
    """Write `obj` (nested dicts/lists/tuples of tensors, arrays and scalars) to `path`.

    The write is atomic: the file is built next to `path`, synced, then renamed
    over it, so a failure leaves any previous checkpoint intact.
    """
    try:
        target = os.path.realpath(os.fspath(path))
    except TypeError:
        raise TypeError(
            f"flow.save: path must be a str or os.PathLike, got {type(path).__name__}"
        ) from None
    if os.path.isdir(target):
        raise IsADirectoryError(
            f"flow.save: {os.fspath(path)!r} is a directory; pass a file path such as "
            f"{os.path.join(os.fspath(path), 'model.safetensors')!r}"
        )
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"flow.save: directory {parent!r} does not exist")

    encoder = _Encoder()
    tree = encoder.encode(obj, "")
    metadata = {
        _VERSION_KEY: str(FORMAT_VERSION),
        _TREE_KEY: json.dumps(tree, allow_nan=False, separators=(",", ":")),
    }
    _remove_stale_temps(parent, os.path.basename(target))
    tmp = os.path.join(parent, f".{os.path.basename(target)}.{os.getpid()}."
                               f"{secrets.token_hex(4)}.tmp")  # fmt: skip
    # Writing through our own descriptor keeps the usual umask rules for the file mode.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            _write(f, encoder.arrays, metadata)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(parent)


def _write(f, arrays: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    """Stream a safetensors file: the header, then each tensor's bytes straight from its
    array (no copy of the whole file in memory). The SHA-256 over every byte of the file
    (its digest field read as zeros) is written into the header last."""
    header: dict[str, Any] = {"__metadata__": {**metadata, _DIGEST_KEY: _NO_DIGEST}}
    offset = 0
    for name in sorted(arrays):
        arr = arrays[name]
        header[name] = {"dtype": _ST_DTYPES[arr.dtype.name], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + arr.nbytes]}  # fmt: skip
        offset += arr.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # safetensors aligns the data to 8 bytes
    head = struct.pack("<Q", len(text)) + text
    h = hashlib.sha256(head)
    f.write(head)
    for name in sorted(arrays):
        data = memoryview(arrays[name].reshape(-1).view(np.uint8))
        for i in range(0, len(data), _CHUNK):
            h.update(data[i : i + _CHUNK])
            f.write(data[i : i + _CHUNK])
    f.seek(_digest_offset(head))
    f.write(h.hexdigest().encode())


def _digest_offset(head: bytes) -> int:
    """Where the digest's 64 hex digits are in the file's first bytes (the header)."""
    key = f'"{_DIGEST_KEY}":"'.encode()
    return head.index(key) + len(key)


def _remove_stale_temps(parent: str, base: str) -> None:
    """Remove temp files of earlier saves to `parent/base` whose writer is gone (killed
    mid-write): names carry the writer's pid; those of older flow (no pid) go after an hour."""
    prefix = f".{base}."
    try:
        names = [n for n in os.listdir(parent) if n.startswith(prefix) and n.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        parts = name[len(prefix) : -len(".tmp")].split(".")
        path, stale = os.path.join(parent, name), False
        if len(parts) == 2 and parts[0].isdigit() and _is_hex(parts[1], 8):
            stale = not _pid_alive(int(parts[0]))
        elif len(parts) == 1 and _is_hex(parts[0], 16):
            with contextlib.suppress(OSError):
                stale = time.time() - os.stat(path).st_mtime > 3600
        else:
            continue  # another file, or the temp of another target whose name extends this one
        if stale:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _is_hex(text: str, digits: int) -> bool:
    return len(text) == digits and all(c in "0123456789abcdef" for c in text)


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True  # another thread of this process may be saving
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # someone else's process (or no way to tell): keep its file
    return True


def _digest_v1(arrays: dict[str, np.ndarray]) -> str:
    """The checksum of format version 1: every tensor's name and bytes (not the structure)."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        data = arrays[name].reshape(-1).view(np.uint8)
        h.update(f"{name}\0{data.size}\0".encode())
        h.update(data)
    return h.hexdigest()


def _file_digest(file: str, recorded: str) -> str | None:
    """SHA-256 of `file` with its recorded digest read as zeros (None: the header does not
    hold the digest exactly once, so nothing matches)."""
    with open(file, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        head = bytearray(struct.pack("<Q", n) + f.read(n))
        quoted = f'"{recorded}"'.encode()
        if head.count(quoted) != 1:
            return None
        at = head.index(quoted) + 1
        head[at : at + len(recorded)] = _NO_DIGEST.encode()
        h = hashlib.sha256(head)
        buf = memoryview(bytearray(1 << 20))  # one reused buffer: no copy of the file
        while n := f.readinto(buf):
            h.update(buf[:n])
    return h.hexdigest()


def _fsync_dir(directory: str) -> None:
    """Make the rename durable; best effort, as not every platform can sync a directory."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------- load


class _Decoder:
    """Rebuilds the object tree from the JSON tree and the stored arrays, checking both."""

    def __init__(self, file: str, arrays: dict[str, np.ndarray]) -> None:
        self.file = file
        self.arrays = arrays
        self.used: dict[tuple[str, str], Any] = {}

    def fail(self, path: str, what: str) -> CheckpointError:
        return CheckpointError(f"{self.file}: corrupted checkpoint {_where(path)}: {what}")

    def decode(self, node: Any, path: str) -> Any:
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.decode(v, _join(path, i)) for i, v in enumerate(node)]
        if not isinstance(node, dict) or len(node) == 0:
            raise self.fail(path, f"unexpected node {node!r:.80}")
        if "dict" in node and len(node) == 1:
            return self._dict(node["dict"], path)
        if "tuple" in node and len(node) == 1 and isinstance(node["tuple"], list):
            return tuple(self.decode(v, _join(path, i)) for i, v in enumerate(node["tuple"]))
        if "float" in node and len(node) == 1 and node["float"] in ("nan", "inf", "-inf"):
            return float(node["float"])
        tags = [t for t in _ARRAY_TAGS if t in node]
        if len(tags) == 1 and set(node) == {tags[0], "dtype", "shape"}:
            return self._array(tags[0], node, path)
        raise self.fail(path, f"unexpected node {node!r:.80}")

    def _dict(self, items: Any, path: str) -> dict:
        if not isinstance(items, list):
            raise self.fail(path, "dict node is not a list of [key, value] pairs")
        out: dict = {}
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
        if not isinstance(name, str) or name not in self.arrays:
            raise self.fail(path, f"reference to tensor {name!r:.80}, which the file does not hold")
        allowed = _TENSOR_DTYPES if tag == "tensor" else _ARRAY_DTYPES
        if not isinstance(dtype, str) or dtype not in allowed:
            raise self.fail(path, f"unsupported dtype {dtype!r:.40} for a {tag}")
        arr = self.arrays[name]
        if arr.dtype.name != dtype or list(arr.shape) != shape:
            raise self.fail(
                path,
                f"tensor {name!r} is stored as {arr.dtype.name}{list(arr.shape)} "
                f"but the tree expects {dtype}{shape!r:.80}",
            )
        if tag == "npscalar" and arr.ndim != 0:
            raise self.fail(path, f"numpy scalar {name!r} is not 0-d")
        if (tag, name) not in self.used:
            value = arr[()] if tag == "npscalar" else arr
            self.used[tag, name] = from_numpy(value) if tag == "tensor" else value
        return self.used[tag, name]


def _read_arrays(file: str) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    """Read the header metadata and every tensor, turning format errors into CheckpointError."""
    try:
        with safetensors.safe_open(file, framework="np") as f:
            metadata = f.metadata() or {}
            arrays = {name: f.get_tensor(name) for name in f.keys()}
    except (OSError, MemoryError):
        raise
    except Exception as err:  # the Rust reader raises SafetensorError and friends
        raise CheckpointError(
            f"{file}: not a valid safetensors checkpoint ({type(err).__name__}: {err})"
        ) from None
    return metadata, arrays


def load(path: str | os.PathLike[str], map_location: str | None = None) -> Any:
    """Read a checkpoint written by `save`, with the same nesting and exact dtypes and shapes.

    A safetensors file written by another tool loads as a flat dict name -> tensor.
    Tensors live in host memory, so `map_location` may only be None or "cpu".
    """
    if map_location not in (None, "cpu"):
        raise ValueError(f"flow.load: map_location={map_location!r} is not supported; use 'cpu'")
    file = os.fspath(path)
    if os.path.isdir(file):
        raise IsADirectoryError(f"flow.load: {file!r} is a directory, not a checkpoint file")
    if not os.path.exists(file):
        raise FileNotFoundError(f"flow.load: no such checkpoint file: {file!r}")
    metadata, arrays = _read_arrays(file)

    if _TREE_KEY not in metadata:
        return {name: _foreign_tensor(file, name, arr) for name, arr in arrays.items()}
    version = metadata.get(_VERSION_KEY)
    if version not in ("1", str(FORMAT_VERSION)):
        raise CheckpointError(
            f"{file}: checkpoint format version {version!r} is not supported "
            f"(this flow reads versions 1 to {FORMAT_VERSION})"
        )
    recorded = metadata.get(_DIGEST_KEY)
    if not isinstance(recorded, str) or len(recorded) != len(_NO_DIGEST):
        raise CheckpointError(f"{file}: corrupted checkpoint: its checksum ({_DIGEST_KEY}) "
                              "is missing or malformed")  # fmt: skip
    if version == "1":  # older flow: the checksum covers the tensor data only
        if recorded != _digest_v1(arrays):
            raise CheckpointError(
                f"{file}: corrupted checkpoint: the tensor data does not match the checksum "
                "recorded when it was saved"
            )
    elif recorded != _file_digest(file, recorded):
        raise CheckpointError(
            f"{file}: corrupted checkpoint: its contents (structure, scalars or tensor data) "
            "do not match the checksum recorded when it was saved"
        )
    try:
        tree = json.loads(metadata[_TREE_KEY])
    except (ValueError, RecursionError) as err:
        raise CheckpointError(f"{file}: corrupted checkpoint: bad structure JSON ({err})") from None
    decoder = _Decoder(file, arrays)
    try:
        obj = decoder.decode(tree, "")
    except RecursionError:
        raise CheckpointError(
            f"{file}: corrupted checkpoint: structure nested too deeply"
        ) from None
    unused = sorted(set(arrays) - {name for _, name in decoder.used})
    if unused:
        raise CheckpointError(
            f"{file}: corrupted checkpoint: tensors not referenced by the structure: "
            f"{', '.join(map(repr, unused[:5]))}{' ...' if len(unused) > 5 else ''}"
        )
    return obj


def _foreign_tensor(file: str, name: str, arr: np.ndarray) -> Tensor:
    if arr.dtype.name not in _TENSOR_DTYPES:
        raise CheckpointError(
            f"{file}: tensor {name!r} has dtype {arr.dtype}, which flow tensors do not "
            f"support (supported: {', '.join(d.name for d in _dtypes.ALL_DTYPES)})"
        )
    return from_numpy(arr)
