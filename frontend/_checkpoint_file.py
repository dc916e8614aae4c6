"""The single-file checkpoint format: one safetensors file, never pickle.

Tensors go into the safetensors body; the nesting around them (`flow._checkpoint_tree`)
goes into the header's `__metadata__` as a JSON tree whose leaves name the stored tensors,
so every file is a plain safetensors file that other tools can read.

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
import os
import secrets
import shutil
import struct
import time
from typing import Any

import numpy as np
import safetensors

from flow._checkpoint_tree import _TENSOR_DTYPES, CheckpointError, _Decoder
from flow.core import dtypes as _dtypes
from flow.core.tensor import Tensor
from flow.ops.basic import from_numpy

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


# ---------------------------------------------------------------------------- save


def save_file(target: str, tree: Any, arrays: dict[str, np.ndarray]) -> None:
    """Write the checkpoint of `tree` and `arrays` to the file `target` (a real path whose
    directory exists), atomically: built next to it, synced, then renamed over it."""
    parent, base = os.path.dirname(target), os.path.basename(target)
    metadata = {
        _VERSION_KEY: str(FORMAT_VERSION),
        _TREE_KEY: json.dumps(tree, allow_nan=False, separators=(",", ":")),
    }
    remove_stale_temps(parent, base)
    tmp = temp_path(parent, base)
    # Writing through our own descriptor keeps the usual umask rules for the file mode.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            _write(f, arrays, metadata)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(parent)


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
        write_array(f, arrays[name], h)
    f.seek(_digest_offset(head))
    f.write(h.hexdigest().encode())


def write_array(f, arr: np.ndarray, h: Any) -> None:
    """Write `arr`'s bytes to `f` in chunks straight from its memory, hashing them into `h`."""
    data = memoryview(arr.reshape(-1).view(np.uint8))
    for i in range(0, len(data), _CHUNK):
        h.update(data[i : i + _CHUNK])
        f.write(data[i : i + _CHUNK])


def _digest_offset(head: bytes) -> int:
    """Where the digest's 64 hex digits are in the file's first bytes (the header)."""
    key = f'"{_DIGEST_KEY}":"'.encode()
    return head.index(key) + len(key)


def temp_path(parent: str, base: str, suffix: str = "tmp") -> str:
    """A fresh temp name next to `parent/base`, carrying this writer's pid."""
    return os.path.join(parent, f".{base}.{os.getpid()}.{secrets.token_hex(4)}.{suffix}")


def remove_stale_temps(parent: str, base: str) -> None:
    """Remove temps (files or directories) of earlier saves to `parent/base` whose writer is
    gone (killed mid-write): names carry the writer's pid; those of older flow (no pid) go
    after an hour. An `.old` directory, the previous checkpoint moved aside by a save that
    died before putting the new one in place, goes back to `base` when that is missing."""
    prefix = f".{base}."
    try:
        names = [n for n in os.listdir(parent)
                 if n.startswith(prefix) and n.endswith((".tmp", ".old"))]  # fmt: skip
    except OSError:
        return
    for name in sorted(names, key=lambda n: not n.endswith(".old")):  # .old ones first
        parts = name[len(prefix) : -len(".tmp")].split(".")
        path, stale = os.path.join(parent, name), False
        if len(parts) == 2 and parts[0].isdigit() and _is_hex(parts[1], 8):
            stale = not _pid_alive(int(parts[0]))
        elif len(parts) == 1 and _is_hex(parts[0], 16) and name.endswith(".tmp"):
            with contextlib.suppress(OSError):
                stale = time.time() - os.stat(path).st_mtime > 3600
        else:
            continue  # another file, or the temp of another target whose name extends this one
        if not stale:
            continue
        target = os.path.join(parent, base)
        if name.endswith(".old") and not os.path.lexists(target):
            try:
                os.rename(path, target)
            except OSError:
                pass
            continue  # never delete the only copy of a checkpoint
        with contextlib.suppress(OSError):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
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


def fsync_dir(directory: str) -> None:
    """Make a rename durable; best effort, as not every platform can sync a directory."""
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


def load_file(file: str, allowed: set[str], make_tensor=from_numpy) -> Any:
    """Read the checkpoint file `file`, checking its checksum and structure."""
    metadata, arrays = _read_arrays(file)
    if _TREE_KEY not in metadata:
        return {name: _foreign_tensor(file, name, arr, make_tensor) for name, arr in arrays.items()}
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
    decoder = _Decoder(file, lambda name, path: arrays[name], set(arrays), allowed, make_tensor)
    try:
        obj = decoder.decode(tree, "")
    except RecursionError:
        raise CheckpointError(
            f"{file}: corrupted checkpoint: structure nested too deeply"
        ) from None
    decoder.check_all_used()
    return obj


def _foreign_tensor(file: str, name: str, arr: np.ndarray, make_tensor) -> Tensor:
    if arr.dtype.name not in _TENSOR_DTYPES:
        raise CheckpointError(
            f"{file}: tensor {name!r} has dtype {arr.dtype}, which flow tensors do not "
            f"support (supported: {', '.join(d.name for d in _dtypes.ALL_DTYPES)})"
        )
    return make_tensor(arr)
