"""Global mode: eager primitives on global tensors, and creation ops that make global ones.

Outside a trace, a primitive with a global operand runs as `flow.distributed`'s
`global_bind` (choose the SBP signature, box the operands, compute the shards); an arg-less
`full` / `iota` goes to `eager_create` (a global `B` tensor while a global VJP rule runs,
else a local constant the same on every rank). Inside `flow.jit` global tensors are traced
like any other. This mode also registers how core's autograd and `Tensor.numpy()` meet
global tensors.
"""

from __future__ import annotations

from flow.core import autograd as _autograd
from flow.core import profiling
from flow.core import tensor as _tensor
from flow.distributed.eager_ops import creating_like, eager_create, global_bind
from flow.distributed.global_tensor import global_numpy, grad_to_leaf

__all__ = ["applies", "creation_applies", "create", "process"]

_CREATION = ("full", "iota")


def creation_applies(prim, args: tuple, trace) -> bool:
    return not args and trace is None and prim.name in _CREATION


def create(prim, args: tuple, params: dict, trace):
    """An eager constant: global inside `creating_like`, else local."""
    return eager_create(prim, params)


def applies(prim, args: tuple, trace) -> bool:
    if trace is None:
        for a in args:  # (a loop: no generator made on the hot path)
            if getattr(a, "_dist", None) is not None:
                return True
    return False


def process(prim, args: tuple, params: dict, trace):
    """`prim` on global tensors, shard by shard."""
    rec = profiling.ACTIVE
    if rec is not None:
        with rec.span(prim.name, "eager", {"global": True}):
            return global_bind(prim, args, params)
    return global_bind(prim, args, params)


_autograd.register_global_hooks(creating_like=creating_like, grad_to_leaf=grad_to_leaf)
_tensor.register_global_numpy(global_numpy)
