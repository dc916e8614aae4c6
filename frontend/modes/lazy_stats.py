"""The counters of `flow.lazy` (`flow.lazy_stats()`): ops recorded, flushes, compiles, cache
hits, programs run on numpy, compile failures."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LazyStats", "count", "counters", "lazy_stats"]


@dataclass(frozen=True)
class LazyStats:
    """Counters of lazy mode since the last reset (see `lazy_stats`).

    `ops`: primitives recorded; `flushes`: pending graphs computed; `compiles`: programs
    lowered and compiled (cache misses); `cache_hits`: runs of an already compiled
    program; `interpreted`: runs on numpy (a small program, or a fallback); `fallbacks`:
    programs whose compilation failed (they run on numpy).
    """

    ops: int = 0
    flushes: int = 0
    compiles: int = 0
    cache_hits: int = 0
    interpreted: int = 0
    fallbacks: int = 0


counters = dict.fromkeys(LazyStats.__dataclass_fields__, 0)


def count(**delta: int) -> None:
    for k, v in delta.items():
        counters[k] += v


def lazy_stats(reset: bool = False) -> LazyStats:
    """A snapshot of the lazy-mode counters; `reset=True` zeroes them afterwards."""
    snapshot = LazyStats(**counters)
    if reset:
        counters.update(dict.fromkeys(counters, 0))
    return snapshot
