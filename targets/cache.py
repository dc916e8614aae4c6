"""On-disk cache of compiled modules, plus an in-process memo in front of it.

Compiling a model takes seconds while reading a cached module takes microseconds, so
compiles are keyed by everything that can change the output: the IR text, the target,
the full flag list, the compiler (and xDSL) versions, the host CPU when a flag says
``host``, and a format version of this cache.

Location: ``$FLOW_CACHE_DIR``, else ``$XDG_CACHE_HOME/flow``, else ``~/.cache/flow``.
``FLOW_CACHE_DIR=off`` or ``FLOW_NO_CACHE=1`` disables caching (disk and memo).
Each entry records the full key it was stored under, covered by its checksum: a valid entry
in another key's slot (a copied or renamed file) is a miss, never another program. A corrupt,
unreadable or old-format entry is a miss, and so is one that passes its checksum but that
IREE's runtime cannot load (checked when the entry is read from disk): that entry is dropped,
and the compile that follows replaces it. An unwritable directory gives one warning and
compiles go on uncached.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import tempfile
import threading
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import metadata
from pathlib import Path

__all__ = [
    "CACHE_FORMAT_VERSION",
    "CacheStats",
    "cache_dir",
    "cache_key",
    "clear_memory",
    "lookup",
    "reset_stats",
    "stats",
    "store",
]

CACHE_FORMAT_VERSION = 1

# Entry file layout: magic, sha256 of the rest, the key's length (2 bytes, little-endian), the
# key, the payload. The digest turns a torn or tampered file into a miss instead of a module
# that crashes at load time; the key, a valid entry in the wrong slot into a miss.
_MAGIC = b"flow-vmfb-cache\x02"
_OLD_MAGICS = (b"flow-vmfb-cache\x01",)  # earlier layouts: misses, replaced on the next store
_DIGEST_SIZE = 32
_KEY_LEN_SIZE = 2
_MEMO_ENTRIES = 64
_OFF_VALUES = {"off", "0", "false", "no", "none", "disabled"}


@dataclass(frozen=True)
class CacheStats:
    """Counters since the last :func:`reset_stats`; ``hits`` = ``memory_hits + disk_hits``.
    Of the misses, ``corrupt`` entries failed their checksum or were not entries, ``stale``
    ones had an earlier layout, ``mismatched`` ones were stored under another key, and
    ``unloadable`` ones passed their checksum but IREE's runtime rejected the module."""

    memory_hits: int = 0
    disk_hits: int = 0
    misses: int = 0
    writes: int = 0
    corrupt: int = 0
    stale: int = 0
    mismatched: int = 0
    unloadable: int = 0

    @property
    def hits(self) -> int:
        return self.memory_hits + self.disk_hits


_lock = threading.Lock()
_stats = CacheStats()
_memo: OrderedDict[str, bytes] = OrderedDict()
_warned_dirs: set[str] = set()


def stats() -> CacheStats:
    """A snapshot of the hit/miss counters."""
    return _stats


def reset_stats() -> None:
    """Zero the counters."""
    global _stats
    with _lock:
        _stats = CacheStats()


def _count(**delta: int) -> None:
    global _stats
    with _lock:
        _stats = replace(_stats, **{k: getattr(_stats, k) + v for k, v in delta.items()})


def clear_memory() -> None:
    """Drop the in-process memo (the disk cache is untouched)."""
    with _lock:
        _memo.clear()


def cache_dir() -> Path | None:
    """The cache directory from the environment, or None when caching is disabled."""
    if os.environ.get("FLOW_NO_CACHE", "").strip().lower() not in ("", "0", "false", "no"):
        return None
    explicit = os.environ.get("FLOW_CACHE_DIR", "").strip()
    if explicit:
        return None if explicit.lower() in _OFF_VALUES else Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "flow"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "absent"


def _installed_version(module: str, dist: str) -> str:
    """The version in the name of `dist`'s dist-info folder beside `module`'s package
    (importlib.metadata scans every path entry: ~50 ms, much of a cached compile)."""
    spec = importlib.util.find_spec(module)
    if spec is not None and spec.submodule_search_locations:
        site = Path(next(iter(spec.submodule_search_locations))).parents[module.count(".")]
        found = sorted(site.glob(f"{dist.replace('-', '_')}-*.dist-info"))
        if len(found) == 1:
            return found[0].name[len(dist) + 1 : -len(".dist-info")]
    return _version(dist)


@lru_cache(maxsize=1)
def _versions() -> tuple[tuple[str, str], ...]:
    return (
        ("iree-base-compiler", _installed_version("iree.compiler", "iree-base-compiler")),
        ("xdsl", _installed_version("xdsl", "xdsl")),
    )


@lru_cache(maxsize=1)
def _host_fingerprint() -> str:
    """Identify the host CPU, so `target-cpu=host` code is never reused on another CPU."""
    parts = [platform.machine()]  # (platform.processor() runs `uname -p`: 15 ms, nothing new)
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key = line.split(":", 1)[0].strip()
                if key in ("vendor_id", "model name", "flags", "Features", "CPU part"):
                    parts.append(line.strip())
                elif not line.strip():
                    break  # the first processor block is enough
    except OSError:
        pass
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def cache_key(source: str, target: str, flags: Sequence[str]) -> str:
    """The sha256 hex key of one compile."""
    header = {
        "format": CACHE_FORMAT_VERSION,
        "target": target,
        "flags": list(flags),
        "versions": dict(_versions()),
    }
    if any(f.endswith("=host") for f in flags):
        header["host"] = _host_fingerprint()
    head = json.dumps(header, sort_keys=True).encode()
    h = hashlib.sha256()
    h.update(len(head).to_bytes(8, "little"))
    h.update(head)
    h.update(source.encode("utf-8"))
    return h.hexdigest()


def _entry_path(directory: Path, key: str) -> Path:
    return directory / key[:2] / f"{key}.vmfb"


def _memo_put(key: str, data: bytes) -> None:
    with _lock:
        _memo[key] = data
        _memo.move_to_end(key)
        while len(_memo) > _MEMO_ENTRIES:
            _memo.popitem(last=False)


def _encode(key: str, data: bytes) -> tuple[bytes, ...]:
    """An entry's bytes after the magic: digest, key length, key, payload."""
    raw_key = key.encode("utf-8")
    head = len(raw_key).to_bytes(_KEY_LEN_SIZE, "little") + raw_key
    digest = hashlib.sha256(head)
    digest.update(data)
    return digest.digest(), head, data


def _read_entry(path: Path, key: str) -> bytes | None:
    """The payload of the entry at ``path`` if it is intact and was stored under ``key``."""
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    if blob.startswith(_OLD_MAGICS):
        _count(stale=1)
        return None
    start = len(_MAGIC) + _DIGEST_SIZE
    if len(blob) < start + _KEY_LEN_SIZE or not blob.startswith(_MAGIC):
        _count(corrupt=1)
        return None
    digest, rest = blob[len(_MAGIC) : start], memoryview(blob)[start:]
    if hashlib.sha256(rest).digest() != digest:
        _count(corrupt=1)
        return None
    key_len = int.from_bytes(rest[:_KEY_LEN_SIZE], "little")
    stored = bytes(rest[_KEY_LEN_SIZE : _KEY_LEN_SIZE + key_len])
    if stored != key.encode("utf-8"):
        _count(mismatched=1)
        return None
    return bytes(rest[_KEY_LEN_SIZE + key_len :])


def _unloadable(data: bytes) -> bool:
    from .runtime import load_problem  # the runtime is only needed once an entry is read

    return load_problem(data) is not None


def _drop(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def lookup(key: str) -> bytes | None:
    """The cached module for ``key`` (memo first, then disk), or None; counts a hit or miss.
    An entry read from disk is checked to load in IREE's runtime; one that does not is a
    miss, and is dropped."""
    directory = cache_dir()
    if directory is None:
        return None
    with _lock:
        data = _memo.get(key)
        if data is not None:
            _memo.move_to_end(key)
    if data is not None:
        _count(memory_hits=1)
        return data
    path = _entry_path(directory, key)
    data = _read_entry(path, key)
    if data is not None and _unloadable(data):
        _count(unloadable=1)
        _drop(path)
        data = None
    if data is None:
        _count(misses=1)
        return None
    _memo_put(key, data)
    _count(disk_hits=1)
    return data


def _warn_unwritable(directory: Path, err: OSError) -> None:
    with _lock:
        if str(directory) in _warned_dirs:
            return
        _warned_dirs.add(str(directory))
    warnings.warn(
        f"flow compile cache directory {str(directory)!r} is not writable ({err}); "
        "compiling without the on-disk cache (set FLOW_CACHE_DIR to change it, or off)",
        RuntimeWarning,
        stacklevel=3,
    )


def store(key: str, data: bytes) -> None:
    """Remember a compiled module: in the memo, and atomically on disk."""
    directory = cache_dir()
    if directory is None:
        return
    _memo_put(key, data)
    path = _entry_path(directory, key)
    tmp_name: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:16]}-", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(_MAGIC)
            for part in _encode(key, data):
                f.write(part)
        os.replace(tmp_name, path)
        tmp_name = None
        _count(writes=1)
    except OSError as err:
        _warn_unwritable(directory, err)
    finally:
        if tmp_name is not None:
            try:
                os.unlink(tmp_name)
            except OSError:
                pass
