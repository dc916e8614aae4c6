"""`flow.nn.parallel.DistributedDataParallel`: OneFlow's data parallelism over local tensors.

Every rank holds the whole model and feeds it its own shard of the data. Wrapping broadcasts
the parameters from rank 0; every `backward()` then averages the gradients over the ranks,
in buckets of `bucket_size` parameters taken in reverse parameter order (the order backward
finishes them). A bucket is all-reduced as soon as each of its parameters has its gradient
(`Tensor.register_post_accumulate_grad_hook`) and every earlier bucket is done; the rest, at
the end of backward (`flow.core.autograd.queue_callback`). Every rank therefore runs the same
all-reduces in the same order, whatever its data reached, and all are done when `backward()`
returns. A parameter without a gradient on some rank (unused by its data) counts as zeros
there; one unused on every rank keeps `.grad` None. With `broadcast_buffers`, the buffers
(e.g. BatchNorm's running statistics) are broadcast from rank 0 before each forward.

As in OneFlow, the module itself is returned, with hooks added: its attributes and its
`state_dict()` keys are unchanged. It runs eagerly; in a world of one process wrapping
changes nothing. For `nn.Graph`, make the model global instead (`to_global` with
`flow.sbp.broadcast`, the data `split(0)`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from flow.core.autograd import is_grad_enabled, no_grad, queue_callback
from flow.core.tensor import Tensor
from flow.core.trace import current_trace
from flow.distributed import env
from flow.distributed.placement import is_global

from ._module import Module

__all__ = ["DistributedDataParallel"]

_IN_TRACE = ("DistributedDataParallel runs eagerly over local tensors, not inside flow.jit / "
             "nn.Graph; for a compiled step make the model global instead "
             "(model.to_global(placement, flow.sbp.broadcast), the data split(0))")  # fmt: skip


def _collectives() -> Any:
    from flow.targets import collectives

    return collectives


def _by_dtype(tensors: Iterable[Tensor]) -> list[list[Tensor]]:
    """`tensors` grouped by dtype, groups in order of first appearance (the same on every
    rank, since every rank has the same model)."""
    groups: dict[Any, list[Tensor]] = {}
    for t in tensors:
        groups.setdefault(t.dtype, []).append(t)
    return list(groups.values())


def _broadcast_(tensors: Iterable[Tensor], what: str) -> None:
    """Give `tensors` rank 0's values, in place: one broadcast per dtype."""
    coll = _collectives()
    with no_grad():
        for group in _by_dtype(tensors):
            flat = np.concatenate([np.ascontiguousarray(t.numpy()).reshape(-1) for t in group])
            flat = coll.broadcast(flat, 0, name=f"DistributedDataParallel: broadcast {what}")
            at = 0
            for t in group:
                n = t.numel()
                t.copy_(Tensor._eager(flat[at:at + n].reshape(tuple(t.shape))))
                at += n


def _check_same_model(named: list[tuple[str, Tensor]], what: str) -> None:
    """Every rank must hold the same parameters and buffers (names, shapes, dtypes), or the
    broadcasts and all-reduces would not match."""
    mine = [(n, tuple(t.shape), str(t.dtype)) for n, t in named]
    every = _collectives().all_gather_object(mine, name="DistributedDataParallel: model check")
    for r, theirs in enumerate(every):
        if theirs != mine:
            diff = next(((a, b) for a, b in zip(mine, theirs) if a != b), None)
            detail = (f"e.g. {diff[0]} here, {diff[1]} on rank {r}" if diff else
                      f"{len(mine)} here, {len(theirs)} on rank {r}")  # fmt: skip
            raise ValueError(f"DistributedDataParallel: the {what} of rank {env.get_rank()} "
                             f"differ from those of rank {r} ({detail}); every rank must wrap "
                             "the same model")  # fmt: skip


class _Reducer:
    """The gradient all-reduces of one wrapped module: buckets, and which parameters have
    their gradient in the current backward pass."""

    def __init__(self, params: list[Tensor], bucket_size: int) -> None:
        order = list(reversed(params))
        self.buckets = [order[i:i + bucket_size] for i in range(0, len(order), bucket_size)]
        self.ready: set[int] = set()
        self.next = 0  # the first bucket not yet all-reduced in this backward pass
        self.queued = False  # the end-of-backward flush is queued
        self.world = env.get_world_size()

    def expect_backward(self) -> None:
        if not self.queued:
            self.queued = True
            queue_callback(self.finish)

    def grad_ready(self, p: Tensor) -> None:
        """A post-accumulate-grad hook: `p` has its gradient; all-reduce the buckets now full."""
        if current_trace() is not None:
            raise RuntimeError(_IN_TRACE)
        self.expect_backward()
        self.ready.add(id(p))
        while self.next < len(self.buckets) and all(
                id(q) in self.ready for q in self.buckets[self.next]):  # fmt: skip
            self._all_reduce(self.next)
            self.next += 1

    def finish(self) -> None:
        """At the end of backward: the buckets not yet all-reduced, in order."""
        while self.next < len(self.buckets):
            self._all_reduce(self.next)
            self.next += 1
        self.ready.clear()
        self.next, self.queued = 0, False

    def _all_reduce(self, index: int) -> None:
        """Average the bucket's gradients over the ranks (one all-reduce per dtype). Each
        parameter adds a 1 to a count when it has a gradient here, so one no rank computed a
        gradient for keeps `.grad` None."""
        for group in _by_dtype(self.buckets[index]):
            dt = group[0].dtype.np_dtype
            parts = [np.zeros(p.numel(), dt) if p.grad is None
                     else np.asarray(p.grad.numpy(), dt).reshape(-1) for p in group]  # fmt: skip
            parts.append(np.array([p.grad is not None for p in group], dt))
            total = _collectives().all_reduce(
                np.concatenate(parts), name=f"DistributedDataParallel: gradient bucket {index}")
            counts = total[len(total) - len(group):]
            at = 0
            for p, count in zip(group, counts):
                n = p.numel()
                if count:
                    grad = Tensor._eager((total[at:at + n] / self.world).astype(dt)
                                         .reshape(tuple(p.shape)))  # fmt: skip
                    device = getattr(p, "_device", None)
                    if device is not None:
                        grad._device = device
                    p.grad = grad
                at += n


def DistributedDataParallel(module: Module, *, broadcast_buffers: bool = True,
                            broadcast_parameters: bool = True, bucket_size: int = 10,
                            use_bucket: bool = True) -> Module:  # fmt: skip
    """Make `module` train data-parallel over the ranks (see the module docstring); returns
    `module` itself. `bucket_size`: parameters per gradient all-reduce (`use_bucket=False`:
    one each); `broadcast_parameters`: start from rank 0's parameters; `broadcast_buffers`:
    rank 0's buffers before each forward."""
    if not isinstance(module, Module):
        raise TypeError("DistributedDataParallel: expected a flow.nn.Module, got "
                        f"{type(module).__name__}")  # fmt: skip
    if isinstance(bucket_size, bool) or not isinstance(bucket_size, int) or bucket_size < 1:
        raise ValueError("DistributedDataParallel: bucket_size is the number of parameters per "
                         f"all-reduce, a positive int; got {bucket_size!r}")  # fmt: skip
    if module.__dict__.get("_is_ddp_module"):
        raise ValueError("DistributedDataParallel: this module is wrapped already")
    if current_trace() is not None:
        raise RuntimeError(_IN_TRACE)
    named = [*module.named_parameters(), *module.named_buffers()]
    for name, t in named:
        if is_global(t):
            raise ValueError(f"DistributedDataParallel: {name!r} is a global tensor; it works "
                             "over local tensors (a global model with flow.sbp.broadcast is "
                             "data-parallel already)")  # fmt: skip
    params = [p for p in module.parameters() if p.requires_grad]
    for name, p in module.named_parameters():
        if p.requires_grad and not p.dtype.is_floating_point:
            raise TypeError(f"DistributedDataParallel: parameter {name!r} has dtype {p.dtype!r}; "
                            "trainable parameters must be floating point")  # fmt: skip
    object.__setattr__(module, "_is_ddp_module", True)
    if env.get_world_size() == 1:
        return module
    _check_same_model(named, "parameters and buffers")
    if broadcast_parameters:
        _broadcast_(list(module.parameters()), "parameters")
    reducer = _Reducer(params, bucket_size if use_bucket else 1)
    object.__setattr__(module, "_ddp_reducer", reducer)
    for p in params:
        p.register_post_accumulate_grad_hook(reducer.grad_ready)

    def before_forward(mod: Module, args: tuple) -> None:
        if current_trace() is not None:
            raise RuntimeError(_IN_TRACE)
        if broadcast_buffers:
            buffers = list(mod.buffers())
            if buffers:
                _broadcast_(buffers, "buffers")

    def after_forward(mod: Module, args: tuple, output: Any) -> None:
        if is_grad_enabled() and params:  # a backward pass will follow: finish it with all-reduces
            reducer.expect_backward()

    module.register_forward_pre_hook(before_forward)
    module.register_forward_hook(after_forward)
    return module
