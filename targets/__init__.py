"""flow.targets: the target table, in-process IREE compilation (cached), and the runtime.

Typical use::

    vmfb = compile_mlir(mlir_text, "cpu")
    (out,) = load(vmfb, "cpu")["main"](a, b)

Per-rank programs that call MPI collectives (``flow.targets.collectives`` documents them)::

    module = load(vmfb, "cpu", collectives=True)

The names below that need IREE's runtime (``load``, the collectives, ...) are imported on first
use, so that ``flow.targets.table``, ``.faults``, ``.mpi`` and ``.comm_abi`` (the ``comm``
import names the lowering spells) load without it.
"""

from __future__ import annotations

import importlib
from typing import Any

from .cache import CacheStats
from .cache import stats as cache_stats
from .compiler import CompileError, Diagnostic, compile_flags, compile_mlir
from .table import DEFAULT_TARGET, TARGETS, Target, UnknownTargetError, get_target
from .vulkan import UnsupportedError, execution_target

_LAZY = {
    "collectives": ("collectives", None),
    "dispatch_count": ("inspect", "dispatch_count"),
    "prepare_iree_for_mpi": ("mpi", "prepare_iree_for_mpi"),
    "register_group": ("groups", "register_group"),
    "register_mesh": ("groups", "register_mesh"),
    **{name: ("runtime", name) for name in (
        "Function", "LoadError", "Module", "RuntimeClosedError", "RuntimeUnavailableError",
        "UnknownFunctionError", "available", "device_names", "load", "require", "resolve_driver",
    )},
}  # fmt: skip
"""Names imported on first use: name -> (module of this package, attribute; None: the module)."""


def __getattr__(name: str) -> Any:
    entry = _LAZY.get(name)
    if entry is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{entry[0]}")
    value = module if entry[1] is None else getattr(module, entry[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "DEFAULT_TARGET",
    "TARGETS",
    "CacheStats",
    "CompileError",
    "Diagnostic",
    "Function",
    "LoadError",
    "Module",
    "RuntimeClosedError",
    "RuntimeUnavailableError",
    "Target",
    "UnknownFunctionError",
    "UnknownTargetError",
    "UnsupportedError",
    "available",
    "cache_stats",
    "collectives",
    "compile_flags",
    "compile_mlir",
    "device_names",
    "dispatch_count",
    "execution_target",
    "get_target",
    "load",
    "prepare_iree_for_mpi",
    "register_group",
    "register_mesh",
    "require",
    "resolve_driver",
]
