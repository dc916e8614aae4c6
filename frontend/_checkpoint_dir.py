"""OneFlow's directory checkpoint layout, without pickle: `flow.save(state, "model")`.

    model/
      snapshot_done            written last (as OneFlow does); holds the index's SHA-256
      flow_checkpoint.json     the index: format version, the object tree (JSON, as in the
                               single-file format), the SHA-256 of every tensor's meta
      weight/out, weight/meta  one folder per entry, nested dicts as nested folders:
      layers.0.bias/out ...    `out` holds the tensor's raw bytes (C order, little-endian),
      optimizer/state/0/...    `meta` its dtype, shape, size and SHA-256 as JSON

Non-tensor leaves (ints, floats, strings, lists such as an optimizer's `param_groups`) live in
the index's tree. The chain snapshot_done -> index -> meta -> out covers every byte, so a
changed, truncated or missing file fails the load with a CheckpointError naming the entry.
A save builds the directory under a temp name next to the target and swaps it in with one
atomic exchange (two renames where the platform has no exchange), so a crash mid-save never
leaves a half checkpoint at the target path.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import string
import sys
from typing import Any

import numpy as np

from flow._checkpoint_file import (
    fsync_dir,
    remove_stale_temps,
    temp_path,
    write_array,
)
from flow._checkpoint_tree import _ARRAY_DTYPES, CheckpointError, _Decoder, _Encoder, _where
from flow.ops.basic import from_numpy

FORMAT = "flow.checkpoint-dir"
VERSION = 1
INDEX = "flow_checkpoint.json"
DONE = "snapshot_done"
DATA, META = "out", "meta"
_RESERVED = {INDEX.lower(), DONE}
_SAFE = frozenset(string.ascii_letters + string.digits + "._-+=,@~()[]")
_CHUNK = 1 << 22


def _folder_name(key: str | int) -> str:
    """A file name for `key`: characters outside a portable set are %-escaped (UTF-8)."""
    text = "".join(c if c in _SAFE else "".join(f"%{b:02X}" for b in c.encode("utf-8"))
                   for c in str(key))  # fmt: skip
    if text.startswith("."):
        text = "%2E" + text[1:]  # no hidden names (and never "." or "..")
    return text[:200] or "(empty)"


class DirEncoder(_Encoder):
    """Names each stored array by its folder: the key path, one folder per key."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._folder = ""
        self._taken: dict[str, set[str]] = {"": set(_RESERVED)}  # folder -> lower-case names

    def _child(self, key: str | int) -> str:
        taken = self._taken.setdefault(self._folder, set())
        base = _folder_name(key)
        name, n = base, 1
        while name.lower() in taken:  # int 0 and str "0", "A" and "a" on case-blind disks
            name, n = f"{base}#{n}", n + 1
        taken.add(name.lower())
        return f"{self._folder}/{name}" if self._folder else name

    def _enter(self, key: str | int) -> Any:
        outer, self._folder = self._folder, self._child(key)
        return outer

    def _leave(self, token: Any) -> None:
        self._folder = token

    def _fresh_name(self, path: str) -> str:
        if not self._folder or self._folder in self.arrays:  # a tensor at the top level
            outer = self._enter("tensor")
            name = self._folder
            self._leave(outer)
            return name
        return self._folder


# ---------------------------------------------------------------------------- save


def check_target(target: str, shown: str) -> None:
    """A directory at `target` may only be replaced when it is empty or a checkpoint."""
    if os.path.isdir(target) and not os.path.islink(target):
        names = os.listdir(target)
        if names and DONE not in names and INDEX not in names:
            raise FileExistsError(
                f"flow.save: {shown!r} is a directory that does not hold a checkpoint; "
                "refusing to replace it: remove it or save to another path"
            )
    elif os.path.lexists(target):
        raise FileExistsError(f"flow.save: {shown!r} exists and is not a directory")


def save_dir(target: str, tree: Any, arrays: dict[str, np.ndarray],
             files: dict[str, bytes] | None = None) -> None:  # fmt: skip
    """Write the checkpoint directory `target` (its parent exists) and swap it in. `files`
    (name -> bytes) are written at its top level too, before the index (a graph export's
    program files; their checksums are the caller's to put in `tree`)."""
    parent, base = os.path.dirname(target), os.path.basename(target)
    remove_stale_temps(parent, base)
    tmp = temp_path(parent, base)
    os.mkdir(tmp)
    try:
        digests = {}
        folders = {tmp}
        for name in sorted(arrays):
            folder = os.path.join(tmp, *name.split("/"))
            os.makedirs(folder, exist_ok=True)
            for i in range(1, name.count("/") + 2):
                folders.add(os.path.join(tmp, *name.split("/")[:i]))
            digests[name] = _write_tensor(folder, arrays[name])
        for name, data in (files or {}).items():
            _write_synced(os.path.join(tmp, name), data)
        index = json.dumps({"format": FORMAT, "version": VERSION, "tree": tree,
                            "tensors": digests}, allow_nan=False, separators=(",", ":"))
        raw = index.encode()
        _write_synced(os.path.join(tmp, INDEX), raw)
        _write_synced(os.path.join(tmp, DONE), hashlib.sha256(raw).hexdigest().encode())
        for folder in sorted(folders, reverse=True):
            fsync_dir(folder)
        _swap_in(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(tmp)
        raise
    fsync_dir(parent)


def _write_synced(file: str, data: bytes) -> None:
    fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _write_tensor(folder: str, arr: np.ndarray) -> str:
    """Write `out` and `meta` into `folder`; returns the SHA-256 of `meta`."""
    h = hashlib.sha256()
    fd = os.open(os.path.join(folder, DATA),
                 os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    with os.fdopen(fd, "wb") as f:
        write_array(f, arr, h)
        f.flush()
        os.fsync(f.fileno())
    meta = json.dumps({"dtype": arr.dtype.name, "shape": list(arr.shape), "nbytes": arr.nbytes,
                       "sha256": h.hexdigest()}, separators=(",", ":")).encode()  # fmt: skip
    _write_synced(os.path.join(folder, META), meta)
    return hashlib.sha256(meta).hexdigest()


def _swap_in(tmp: str, target: str) -> None:
    """Put the finished directory `tmp` at `target`; what was there is removed."""
    if not os.path.lexists(target) or not os.listdir(target):
        os.replace(tmp, target)  # rename(2) replaces an empty directory too
        return
    if _exchange(tmp, target):
        shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the previous checkpoint
        return
    parent, base = os.path.split(target)
    old = temp_path(parent, base, "old")
    os.rename(target, old)
    try:
        os.rename(tmp, target)
    except BaseException:
        os.rename(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _exchange(a: str, b: str) -> bool:
    """Swap the paths `a` and `b` atomically (Linux renameat2 RENAME_EXCHANGE); False where
    the platform or file system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), b)


# ---------------------------------------------------------------------------- load


def is_checkpoint_dir(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, DONE)) or os.path.isfile(
        os.path.join(directory, INDEX))


def load_dir(directory: str, allowed: set[str], make_tensor=from_numpy,
             decoder_class: type[_Decoder] = _Decoder) -> Any:  # fmt: skip
    """Read the checkpoint directory `directory`, checking every file against the index
    (`decoder_class` may decode more kinds of node: flow._graph_export's graphs)."""
    done, index_file = os.path.join(directory, DONE), os.path.join(directory, INDEX)
    if not os.path.isfile(done):
        what = ("an incomplete checkpoint (no snapshot_done marker: its save did not finish)"
                if os.path.isfile(index_file) else "not a checkpoint directory (no "
                f"{DONE} marker or {INDEX} index)")  # fmt: skip
        raise CheckpointError(f"{directory}: {what}")
    if not os.path.isfile(index_file):
        raise CheckpointError(f"{directory}: not a flow checkpoint: it has {DONE} but no {INDEX} "
                              "index (OneFlow's protobuf metadata is not read)")  # fmt: skip
    with open(index_file, "rb") as f:
        raw = f.read()
    with open(done, "rb") as f:
        recorded = f.read().strip().decode("ascii", "replace")
    if hashlib.sha256(raw).hexdigest() != recorded:
        raise CheckpointError(f"{directory}: corrupted checkpoint: {INDEX} does not match the "
                              f"checksum in {DONE}")  # fmt: skip
    try:
        index = json.loads(raw)
    except (ValueError, RecursionError) as err:
        raise CheckpointError(f"{directory}: corrupted checkpoint: bad {INDEX} ({err})") from None
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise CheckpointError(f"{directory}: {INDEX} is not a flow checkpoint index")
    if index.get("version") != VERSION:
        raise CheckpointError(f"{directory}: checkpoint directory version "
                              f"{index.get('version')!r} is not supported (this flow reads "
                              f"version {VERSION})")  # fmt: skip
    digests = index.get("tensors")
    if not isinstance(digests, dict) or not all(
            isinstance(k, str) and _safe_relative(k) and isinstance(v, str)
            for k, v in digests.items()):  # fmt: skip
        raise CheckpointError(f"{directory}: corrupted checkpoint: bad tensor list in {INDEX}")

    def fetch(name: str, path: str) -> np.ndarray:
        return _read_tensor(directory, name, digests[name], path)

    decoder = decoder_class(directory, fetch, set(digests), allowed, make_tensor)
    try:
        obj = decoder.decode(index.get("tree"), "")
    except RecursionError:
        raise CheckpointError(f"{directory}: corrupted checkpoint: structure nested too "
                              "deeply") from None  # fmt: skip
    decoder.check_all_used()
    return obj


def _safe_relative(name: str) -> bool:
    """A relative path inside the checkpoint: no empty, '.', '..' or absolute parts."""
    parts = name.split("/")
    return all(p not in ("", ".", "..") and "\\" not in p and "\0" not in p for p in parts)


def _np_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _read_tensor(directory: str, name: str, meta_digest: str, path: str) -> np.ndarray:
    """The array in folder `name`, its meta and data checked against the recorded digests."""
    folder = os.path.join(directory, *name.split("/"))

    def fail(what: str) -> CheckpointError:
        return CheckpointError(f"{directory}: corrupted checkpoint {_where(path)} "
                               f"(folder {name!r}): {what}")  # fmt: skip

    try:
        with open(os.path.join(folder, META), "rb") as f:
            raw = f.read(1 << 16)
    except FileNotFoundError:
        raise fail(f"its {META} file is missing") from None
    if hashlib.sha256(raw).hexdigest() != meta_digest:
        raise fail(f"its {META} file does not match the checksum in {INDEX}")
    meta = json.loads(raw)  # covered by the digest: written by flow.save
    dtype, shape, nbytes = meta.get("dtype"), meta.get("shape"), meta.get("nbytes")
    if dtype not in _ARRAY_DTYPES or not isinstance(shape, list) or not all(
            isinstance(d, int) and d >= 0 for d in shape):  # fmt: skip
        raise fail(f"bad {META} {meta!r:.80}")
    arr = np.empty(shape, _np_dtype(dtype))
    if arr.nbytes != nbytes:
        raise fail(f"{META} gives {nbytes} bytes for {dtype}{shape}")
    try:
        f = open(os.path.join(folder, DATA), "rb")
    except FileNotFoundError:
        raise fail(f"its {DATA} file is missing") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if size != nbytes:
            raise fail(f"its {DATA} file holds {size} bytes, {dtype}{shape} needs {nbytes}"
                       + (" (truncated)" if size < nbytes else ""))  # fmt: skip
        h = hashlib.sha256()
        view = memoryview(arr.reshape(-1).view(np.uint8))
        for i in range(0, nbytes, _CHUNK):
            chunk = view[i : i + _CHUNK]
            if f.readinto(chunk) != len(chunk):
                raise fail(f"its {DATA} file ended early (truncated)")
            h.update(chunk)
    if h.hexdigest() != meta.get("sha256"):
        raise fail(f"the data in {DATA} does not match the checksum recorded when it was saved")
    return arr
