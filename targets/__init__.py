"""flow.targets: the target table, in-process IREE compilation (cached), and the runtime.

Typical use::

    vmfb = compile_mlir(mlir_text, "cpu")
    (out,) = load(vmfb, "cpu")["main"](a, b)

Per-rank programs that call MPI collectives (``flow.targets.collectives`` documents the ABI)::

    module = load(vmfb, "cpu", collectives=True)
"""

from __future__ import annotations

from . import collectives
from .cache import CacheStats
from .cache import stats as cache_stats
from .collectives import prepare_iree_for_mpi, register_group, register_mesh
from .compiler import CompileError, Diagnostic, compile_flags, compile_mlir
from .runtime import (
    Function,
    LoadError,
    Module,
    RuntimeClosedError,
    RuntimeUnavailableError,
    UnknownFunctionError,
    available,
    device_names,
    load,
    require,
    resolve_driver,
)
from .table import DEFAULT_TARGET, TARGETS, Target, UnknownTargetError, get_target
from .vulkan import UnsupportedError, execution_target

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
    "execution_target",
    "get_target",
    "load",
    "prepare_iree_for_mpi",
    "register_group",
    "register_mesh",
    "require",
    "resolve_driver",
]
