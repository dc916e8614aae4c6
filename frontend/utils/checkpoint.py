"""`flow.utils.checkpoint`: activation checkpointing (PyTorch's `torch.utils.checkpoint`).

`checkpoint(fn, *args, use_reentrant=False, preserve_rng_state=True, **kwargs)` runs `fn`
without recording its ops, so none of its intermediate values is kept for the backward
pass; the outputs get one backward node (a `NodeGroup` of flow.core.autograd) over the
tensors requiring grad that `fn` read: its tensor arguments, the parameters it uses, tensors
it captures. The backward pass runs `fn` again with grad enabled and propagates the
outputs' gradients through that recomputation down to those tensors.

The default generator's state is restored for the recomputation, so that dropout draws the
same masks (`preserve_rng_state`). Traced (in `flow.jit` or `nn.Graph`), the recomputation
is emitted into the backward pass of the program: the block's ops appear a second time, and
every value from before that the recomputation and its backward pass read (the block's
inputs, the parameters and buffers it uses, its random keys) passes through a
`flow.optimization_barrier` tied to the incoming gradient. So the compiler can neither merge
a recomputed op with its forward original (which would keep that activation alive from the
forward pass to the backward pass) nor compute it before the backward pass reaches the
block. A block that updates state (an eager tensor such as BatchNorm's running statistics)
is refused when traced, as its update would run twice; in eager mode it runs twice, as in
PyTorch.

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

    def vjp(cts, *_inputs):
        dep = next(ct for ct in cts if ct is not None)
        start = trace.block.last_op if trace is not None else None
        n_args = len(trace.block.args) if trace is not None else 0
        with (_rng_restored(rng), _replaying_keys(trace, keys, preserve_rng_state),
              ag.enable_grad()):  # fmt: skip
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
        if trace is not None:
            _wall_off(trace, start, n_args, dep)
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


@contextlib.contextmanager
def _replaying_keys(trace, keys: list, preserve: bool):
    """Within, traced: random ops draw `keys` again, in order (`_wall_off` puts them
    behind the barrier with the block's other inputs)."""
    if trace is None or not preserve or not keys:
        yield
        return
    saved, trace.key_replay = trace.key_replay, list(keys)
    try:
        yield
    finally:
        trace.key_replay = saved


# ops whose values depend on no input: the compiler recomputes them where used anyway
_INPUT_FREE = ("flow.constant", "flow.full", "flow.iota")


def _wall_off(trace, start, n_args: int, dep: Tensor) -> None:
    """Put the values from before `start` (and the first `n_args` arguments) that the ops
    emitted after it read behind one barrier each, tied to `dep`: the ops after `start` (a
    recomputed block and its backward pass) then compute new values, which the compiler
    cannot merge with the forward pass's, nor compute before `dep` exists.

    Each barrier is tied to a token of its own, a scalar computed from `dep`, rather than
    to `dep` itself: IREE 3.13 requires all operands of a `util.optimization_barrier` to
    end up with the same lifetime, and fails to verify one that mixes a transient value
    with an external one (a parameter, a gradient the program returns or a collective
    passes on). A token that only its barrier reads takes the lifetime of its value; one
    token shared by several barriers would tie them all together.
    """
    from xdsl.ir import BlockArgument

    from flow.core import dtypes
    from flow.primitives import bind, cast, optimization_barrier, reduce

    first = start.next_op if start is not None else trace.block.first_op
    ops = []
    while first is not None:
        ops.append(first)
        first = first.next_op
    inside = {r for op in ops for r in op.results}
    outside: dict = {}
    for op in ops:
        for v in op.operands:
            if v in inside or v in outside or v is dep._value:
                continue
            if getattr(v.owner, "name", None) in _INPUT_FREE:
                continue
            if isinstance(v, BlockArgument) and v.index >= n_args:
                continue  # an argument the ops added (a new random key): nothing computed
            outside[v] = None
    if not outside:
        return
    emitted = set(ops)
    anchor = ops[0].prev_op
    mark = trace.block.last_op
    with ag.no_grad():
        # a sum and products: what keeps a split or partial gradient's token local (SBP)
        wide = dep if dep.dtype == dtypes.float32 else bind(cast, dep, dtype=dtypes.float32)
        token = bind(reduce, wide, kind="sum", dims=tuple(range(dep.ndim))) if dep.ndim else wide
        walls = []
        for i, v in enumerate(outside):
            own = token * float(i + 2)  # a token of its own per barrier (see above)
            value = Tensor._traced(v, trace, dtypes.from_ir(v.type.element_type))
            walls.append((v, bind(optimization_barrier, value, own)))
    new_ops = []
    op = mark.next_op
    while op is not None:
        new_ops.append(op)
        op = op.next_op
    for op in new_ops:  # emitted last: move them ahead of the ops that read them
        op.detach()
    if anchor is None:
        trace.block.insert_ops_before(new_ops, trace.block.first_op)
    else:
        trace.block.insert_ops_after(new_ops, anchor)
    for v, wall in walls:
        v.replace_uses_with_if(wall._value, lambda use: use.operation in emitted)
