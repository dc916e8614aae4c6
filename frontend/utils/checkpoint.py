"""`flow.utils.checkpoint`: activation checkpointing (PyTorch's `torch.utils.checkpoint`).

`checkpoint(fn, *args, use_reentrant=False, preserve_rng_state=True, **kwargs)` runs `fn`
without recording its ops, so none of its intermediate values is kept for the backward
pass; the outputs get one backward node (a `NodeGroup` of flow.core.autograd) over the
tensors requiring grad that `fn` read: its tensor arguments, the parameters it uses, tensors
it captures. The backward pass runs `fn` again with grad enabled and propagates the
outputs' gradients through that recomputation down to those tensors.

The default generator's state is restored for the recomputation, so that dropout draws the
same masks (`preserve_rng_state`). Traced (in `flow.jit` or `nn.Graph`), the recomputation
is emitted into the backward pass of the program: the block's ops appear a second time,
reading the block's inputs (and random keys) through `flow.optimization_barrier`, tied to
the incoming gradient, so that the compiler neither merges them with the forward ops nor
computes them before the backward pass. A block that updates state (an eager tensor such
as BatchNorm's running statistics) is refused when traced, as its update would run twice;
in eager mode it runs twice, as in PyTorch.

`use_reentrant=True` keeps PyTorch's older variant's rules: no keyword arguments, and the
outputs require grad only if a tensor argument does (else a warning, and no gradients).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable

from flow.core import autograd as ag
from flow.core.pytree import leaves
from flow.core.tensor import Tensor
from flow.core.trace import current_trace

__all__ = ["checkpoint"]


def checkpoint(function: Callable, *args, use_reentrant: bool | None = None,
               preserve_rng_state: bool = True, **kwargs):  # fmt: skip
    """`function(*args, **kwargs)`, its activations recomputed in the backward pass instead
    of kept (see the module docstring). `use_reentrant=None` warns and means True, as in
    PyTorch; pass False (recommended) for keyword arguments and gradients of parameters
    whatever the inputs."""
    name = _name(function)
    if not callable(function):
        raise TypeError(f"checkpoint: expected a callable, got {type(function).__name__}")
    if use_reentrant is None:
        warnings.warn("checkpoint: pass use_reentrant explicitly; use_reentrant=None means "
                      "True (PyTorch's default), use_reentrant=False is recommended",
                      stacklevel=2)  # fmt: skip
        use_reentrant = True
    if use_reentrant and kwargs:
        raise ValueError(f"checkpoint({name}): unexpected keyword arguments "
                         f"{sorted(kwargs)}; use_reentrant=True takes positional arguments "
                         "only, pass use_reentrant=False for keyword arguments")  # fmt: skip
    if not ag.is_grad_enabled():
        return function(*args, **kwargs)
    if use_reentrant and not any(isinstance(a, Tensor) and a._requires_grad for a in args):
        warnings.warn(f"checkpoint({name}): none of the inputs have requires_grad=True; "
                      "gradients will be None (use_reentrant=False computes the gradients "
                      "of the parameters it uses)", stacklevel=2)  # fmt: skip
        with ag.no_grad():
            return function(*args, **kwargs)

    trace = current_trace()
    rng = _rng_state() if preserve_rng_state else None
    keys: list = []
    mutated = set(trace.mutated) if trace is not None else set()
    with ag.no_grad(), ag.reading_inputs() as found, _logging_keys(trace, keys):
        out = function(*args, **kwargs)
    if trace is not None and set(trace.mutated) - mutated:
        t = next(trace.mutated[k][0] for k in trace.mutated if k not in mutated)
        raise RuntimeError(f"checkpoint({name}): the checkpointed block updates a tensor of "
                           f"shape {list(t.shape)} that it does not compute (module state, "
                           "e.g. BatchNorm's running statistics in training); recomputing "
                           "it in the backward pass would update it twice. Leave this block "
                           "out of checkpointing, or put the module in eval() mode")  # fmt: skip
    flat = leaves(out)
    outputs = [i for i, o in enumerate(flat) if _new_differentiable(o, found)]
    if not found or not outputs:
        return out
    inputs = list(found.values())
    # traced: what the recomputation reads through barriers (tensor arguments too, even
    # those not requiring grad: the forward ops on them must not be merged either)
    walled = {**{id(a): a for a in leaves((args, kwargs)) if isinstance(a, Tensor)}, **found}

    def vjp(cts, *_inputs):
        dep = next(ct for ct in cts if ct is not None)
        with (_rng_restored(rng), _replaying_keys(trace, keys, dep, preserve_rng_state),
              _behind_barrier(trace, list(walled.values()), dep), ag.enable_grad()):  # fmt: skip
            again = leaves(function(*args, **kwargs))
        if len(again) != len(flat):
            raise RuntimeError(f"checkpoint({name}): recomputing the block gave {len(again)} "
                               f"outputs, the forward pass {len(flat)}; a checkpointed "
                               "function must compute the same thing again")  # fmt: skip
        roots, seeds = [], []
        for i, ct in zip(outputs, cts):
            if ct is not None and getattr(again[i], "_requires_grad", False):
                roots.append(again[i])
                seeds.append(ct)
        got = ag.run_backward(roots, seeds, found, create_graph=ag.is_grad_enabled())
        return tuple(got.get(id(t)) for t in inputs)

    ag.NodeGroup("checkpoint", vjp, inputs, [flat[i] for i in outputs])
    return out


def _name(function) -> str:
    return getattr(function, "__qualname__", None) or type(function).__name__


def _new_differentiable(o, found: dict) -> bool:
    """Whether output `o` is a tensor the block computed that can carry a gradient."""
    return (isinstance(o, Tensor) and o._dtype.is_floating_point and not o._requires_grad
            and id(o) not in found)  # fmt: skip


def _rng_state():
    from flow.ops.random import default_generator as g

    return g._seed, g._offset, g._per_rank


@contextlib.contextmanager
def _rng_restored(state):
    """Within: the default generator as it was at `state` (eager mode; nothing when None)."""
    if state is None or current_trace() is not None:
        yield
        return
    from flow.ops.random import default_generator as g

    now = _rng_state()
    g._seed, g._offset, g._per_rank = state
    try:
        yield
    finally:
        g._seed, g._offset, g._per_rank = now


@contextlib.contextmanager
def _logging_keys(trace, keys: list):
    """Within, traced: the random keys drawn are appended to `keys`."""
    if trace is None:
        yield
        return
    saved, trace.key_log = trace.key_log, keys
    try:
        yield
    finally:
        trace.key_log = saved


def _barrier(t: Tensor, dep: Tensor) -> Tensor:
    from flow.primitives import bind, optimization_barrier

    with ag.no_grad():
        return bind(optimization_barrier, t, dep)


@contextlib.contextmanager
def _replaying_keys(trace, keys: list, dep: Tensor, preserve: bool):
    """Within, traced: random ops draw `keys` again (behind barriers), in order."""
    if trace is None or not preserve or not keys:
        yield
        return
    from flow.core import dtypes

    again = [_barrier(Tensor._traced(k, trace, dtypes.int64), dep)._value for k in keys]
    saved, trace.key_replay = trace.key_replay, again
    try:
        yield
    finally:
        trace.key_replay = saved


@contextlib.contextmanager
def _behind_barrier(trace, inputs: list, dep: Tensor):
    """Within, traced: the block's traced inputs stand for themselves behind a barrier tied
    to `dep`, so the recomputed ops are new values that the compiler cannot merge with the
    forward pass's, nor compute before `dep`."""
    if trace is None:
        yield
        return
    swapped = [(t, t._value) for t in inputs if t._trace is trace and id(t) not in trace.mutated]
    for t, value in swapped:
        t._value = _barrier(t, dep)._value
    try:
        yield
    finally:
        for t, value in swapped:
            t._value = value
