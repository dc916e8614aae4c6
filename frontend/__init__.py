"""flow: a OneFlow-style deep learning framework built on MLIR (xDSL) and IREE.

Eager tensors run on numpy; `flow.jit` traces the same code into the `flow`
dialect, lowers it to linalg and compiles it with IREE for cpu, cuda, rocm or
vulkan.
"""

from __future__ import annotations

from flow.ops import activations as _activations
from flow.ops import basic as _ops
from flow.ops import construct as _construct
from flow.ops import conv as _conv
from flow.ops import creation as _creation
from flow.ops import gather as _gather
from flow.ops import indexing as _indexing
from flow.ops import interpolate as _interpolate
from flow.ops import linalg as _linalg
from flow.ops import logical as _logical
from flow.ops import math as _math
from flow.ops import movement as _movement
from flow.ops import pooling as _pooling
from flow.ops import random as _random
from flow.ops import reduction as _reduction
from flow.core.autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from flow.core.device import device
from flow.core.dtypes import bfloat16, bool_, dtype, float16, float32, float64, int8, int32, int64
from flow.distributed.placement import placement, sbp
from flow.compile.jit import Compiled, Lowered, jit
from flow.modes.lazy import LazyStats, lazy, lazy_stats, lazy_sync
from flow.ops.activations import *  # noqa: F403  (each module lists its public ops in __all__)
from flow.ops.basic import *  # noqa: F403
from flow.ops.construct import *  # noqa: F403
from flow.ops.conv import *  # noqa: F403
from flow.ops.creation import *  # noqa: F403
from flow.ops.gather import *  # noqa: F403
from flow.ops.indexing import *  # noqa: F403
from flow.ops.interpolate import *  # noqa: F403
from flow.ops.linalg import *  # noqa: F403
from flow.ops.logical import *  # noqa: F403
from flow.ops.math import *  # noqa: F403
from flow.ops.movement import *  # noqa: F403
from flow.ops.pooling import *  # noqa: F403
from flow.ops.random import *  # noqa: F403
from flow.ops.reduction import *  # noqa: F403
from flow.serialization import CheckpointError, load, save
from flow.core.tensor import Size, Tensor
from flow.ops.methods import install_tensor_methods

install_tensor_methods()

from . import amp, autograd, cuda, distributed, env, nn, optim, transforms, utils  # noqa: E402  (built on the ops)
from . import profiler  # noqa: E402  (flow.profiler; loads nothing of the compiler side)
from .amp import autocast  # noqa: E402

bool = bool_  # noqa: A001  (flow.bool, like torch.bool)
float = float32  # noqa: A001
double = float64
half = float16
int = int32  # noqa: A001
long = int64

__version__ = "0.1.0"

# The compiler side loads on first use (`import flow` stays light): `flow.targets.available()`
# works without importing `flow.targets` first, as for any subpackage.
_LAZY_SUBPACKAGES = ("dialect", "lowering", "targets", "tools")


def __getattr__(name: str):
    if name in _LAZY_SUBPACKAGES:
        import importlib

        return importlib.import_module(f"flow.{name}")
    raise AttributeError(f"module 'flow' has no attribute '{name}'")

__all__ = [
    "Tensor", "Size", "dtype", "jit", "Lowered", "Compiled", "nn", "autograd", "no_grad",
    "lazy", "lazy_stats", "lazy_sync", "LazyStats",
    "utils", "transforms", "optim", "env", "distributed", "cuda", "amp", "autocast", "profiler",
    "placement", "sbp", "device",
    "enable_grad", "set_grad_enabled", "is_grad_enabled", "save", "load", "CheckpointError",
    "bool", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64",
    "float", "double", "half", "int", "long",
    *_construct.__all__, *_ops.__all__, *_math.__all__, *_logical.__all__, *_reduction.__all__,
    *_linalg.__all__, *_movement.__all__, *_indexing.__all__, *_gather.__all__,
    *_creation.__all__, *_random.__all__, *_conv.__all__, *_pooling.__all__,
    *_interpolate.__all__, *_activations.__all__,
]  # fmt: skip
