"""Reverse-mode autodiff: a tape of primitive applications, VJP rules in frontend ops.

`bind` records a `Node` for every primitive applied to a tensor that requires
grad. `backward` walks the nodes in reverse topological order and calls each
primitive's VJP rule, which is written with the same frontend ops as
everything else — so inside `flow.jit` (or `nn.Graph.build`) the backward pass
is traced into the same IR as the forward pass.

Global tensors meet autograd through two hooks the global mode registers
(`register_global_hooks`): constants a VJP rule makes are global like the node's output,
and a gradient reaching a global leaf takes the leaf's distribution. The seed of
`backward()` is made by the ops `register_seed_factories` names.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from flow.core.grad_hooks import (  # noqa: F401  (re-exported: the public names)
    RemovableHandle,
    _apply_hooks,
    _born_in,
    _post_accumulate,
    _run_callbacks,
    check_reached,
    queue_callback,
    register_hook,
    register_post_accumulate_grad_hook,
    retain_grad,
)
from flow.core.trace import current_trace as _current_trace
from flow.dialect.attr_names import PHASE_ATTR


class _State(threading.local):  # per thread; the class attributes are the defaults
    enabled = True  # the grad mode
    probes = ()  # see reading_inputs


_state = _State()
_NULL = contextlib.nullcontext()


def _needs_ops(*args, **kwargs):
    raise RuntimeError("backward() needs flow's ops to make its seed gradients (import flow)")


class _Hooks:
    """What autograd runs from higher layers (registered at import; defaults: local tensors)."""

    creating_like: Callable = staticmethod(lambda *tensors: contextlib.nullcontext())
    grad_to_leaf: Callable = staticmethod(lambda g, leaf: g)
    ones_like: Callable = staticmethod(_needs_ops)
    tensor: Callable = staticmethod(_needs_ops)


def register_global_hooks(*, creating_like: Callable, grad_to_leaf: Callable) -> None:
    """`creating_like(*tensors)`: a context within which creation ops make tensors
    distributed like the first global one of `tensors` (a VJP rule's constants);
    `grad_to_leaf(g, leaf)`: the gradient `g` in `leaf`'s distribution."""
    _Hooks.creating_like = staticmethod(creating_like)
    _Hooks.grad_to_leaf = staticmethod(grad_to_leaf)


def register_seed_factories(*, ones_like: Callable, tensor: Callable) -> None:
    """`ones_like(out)`: the implicit gradient of a scalar output; `tensor(data, dtype)`: a
    gradient passed as data (a list, an array)."""
    _Hooks.ones_like = staticmethod(ones_like)
    _Hooks.tensor = staticmethod(tensor)


def is_grad_enabled() -> bool:
    return _state.enabled


def set_grad_enabled(mode: bool) -> None:
    _state.enabled = bool(mode)


class _GradMode(contextlib.ContextDecorator):
    """Context manager and decorator that sets the grad mode (restored on exit)."""

    def __init__(self, mode: bool):
        self.mode = mode

    def __enter__(self):
        self.prev = is_grad_enabled()
        set_grad_enabled(self.mode)
        return self

    def __exit__(self, *exc) -> None:
        set_grad_enabled(self.prev)


def no_grad(fn: Callable | None = None):
    """`with flow.no_grad():` / `@flow.no_grad()` / `@flow.no_grad`: record nothing."""
    if callable(fn):
        return _GradMode(False)(fn)
    return _GradMode(False)


def enable_grad(fn: Callable | None = None):
    if callable(fn):
        return _GradMode(True)(fn)
    return _GradMode(True)


@dataclass(eq=False)
class Node:
    """One recorded application: `out = prim(*inputs, **params)`; the `grad_fn` of `out`."""

    op: str  # the primitive's name
    vjp: Callable | None
    inputs: tuple
    params: dict
    out_ref: weakref.ref  # the output, held weakly: no tensor <-> node cycle for the collector
    freed: bool = False
    hooks: dict | None = None  # the output's gradient hooks (Tensor.register_hook), in order
    retain: bool = False  # the output keeps its gradient in `.grad` (Tensor.retain_grad)
    group: NodeGroup | None = None  # the application of several outputs this node is one of
    scope: str = ""  # the traced module path it was recorded in; its VJP's ops are named so

    @property
    def out(self):
        """The output tensor (None once it is gone)."""
        return self.out_ref()

    def name(self) -> str:
        """PyTorch's spelling of the backward function: `MulBackward0`, `SumBackward0`."""
        base = self.params.get("kind", self.op) if self.op == "reduce" else self.op
        return "".join(part.capitalize() for part in str(base).split("_")) + "Backward0"

    def __repr__(self) -> str:
        return f"<{self.name()}>"


class NodeGroup:
    """One application with several outputs (a checkpointed block): each output's `Node` has
    `group` set to it and the group's `inputs`. Backward runs `vjp(cts, *inputs)` once, after
    the gradients of all the outputs are complete; `cts` holds one gradient per output, None
    for an output no gradient reached. It returns one gradient (or None) per input."""

    def __init__(self, op: str, vjp: Callable, inputs: Sequence, outputs: Sequence):
        self.op, self.vjp, self.inputs, self.freed = op, vjp, tuple(inputs), False
        self.nodes = []
        for out in outputs:
            out._requires_grad = True
            out._node = Node(op, None, self.inputs, {}, weakref.ref(out), group=self)
            self.nodes.append(out._node)


# set while nn.Graph traces a step: (leaf, gradient) -> the gradient laid out as the
# step keeps it (a global parameter's gradient boxed to the parameter's SBP)
GRAD_HOOK: list[Callable | None] = [None]


def _keep_grad(t, g, create_graph: bool) -> None:
    """Accumulate `g` into `t.grad` (a leaf's gradient, or a retained one)."""
    if not create_graph:
        g = g.detach()
    if GRAD_HOOK[0] is not None:
        g = GRAD_HOOK[0](t, g)
    t.grad = g if t.grad is None else (t.grad + g)


def _differentiable(t) -> bool:
    return t._dtype.is_floating_point


@contextlib.contextmanager
def reading_inputs() -> Iterator[dict]:
    """Within, with grad disabled: {id: tensor} of the tensors requiring grad that the ops
    read (what a checkpointed block, run without recording, needs gradients for)."""
    probes = _state.__dict__.setdefault("probes", [])
    found: dict = {}
    probes.append(found)
    try:
        yield found
    finally:
        probes.remove(found)


def record(name: str, vjp: Callable | None, inputs: Sequence, params: dict, out):
    """Attach a node to `out` if grad is enabled and an input requires grad."""
    if not _state.enabled:  # (is_grad_enabled, inline: every op asks)
        for found in _state.probes:  # see reading_inputs
            found.update((id(t), t) for t in inputs if getattr(t, "_requires_grad", False))
        return out
    if not _differentiable(out):
        return out
    for t in inputs:  # (a loop: no generator made on the hot path)
        if getattr(t, "_requires_grad", False):
            break
    else:
        return out
    out._requires_grad = True
    out._node = Node(name, vjp, tuple(inputs), params, weakref.ref(out))
    trace = _current_trace()
    if trace is not None and trace.scope:
        out._node.scope = trace.scope
    return out


def recording(inputs: Sequence) -> bool:
    """Whether an op on `inputs` would be recorded for autograd now (see `record`)."""
    if not _state.enabled:
        return bool(_state.probes) and any(getattr(t, "_requires_grad", False) for t in inputs)
    return any(getattr(t, "_requires_grad", False) for t in inputs)


def _topo(roots: Sequence, stop=()) -> list:
    """Nodes (and node groups, once each) reachable from `roots` without passing through a
    tensor in `stop` (ids), each after every node that consumes its output."""
    order: list = []
    seen: set[int] = set()
    stack = [(t, False) for t in roots]
    while stack:
        t, done = stack.pop()
        node = None if id(t) in stop else getattr(t, "_node", None)
        if node is None:
            continue
        unit = node.group or node
        if done:
            order.append(unit)
            continue
        if id(unit) in seen:
            continue
        seen.add(id(unit))
        stack.append((t, True))
        stack.extend((i, False) for i in unit.inputs if getattr(i, "_requires_grad", False))
    order.reverse()
    return order


def _accumulate(grads: dict, t, ct) -> None:
    key = id(t)
    if key in grads:
        grads[key] = (grads[key][0], grads[key][1] + ct)
    else:
        grads[key] = (t, ct)


def _freed_error():
    from flow.core.errors import op_error

    return op_error("backward", "trying to backward through the graph a second time (or "
                    "directly access saved tensors after they have already been freed); pass "
                    "retain_graph=True to the first backward", cls=RuntimeError)  # fmt: skip


def _creating_like(creating_like: Callable, outs: Sequence, inputs: Sequence):
    """`creating_like(*outs, *inputs)` (the ones not None) where one of them is global; a null
    context where none is, as `creating_like` would change nothing then (this runs per node)."""
    for t in (*outs, *inputs):
        if getattr(t, "_dist", None) is not None:
            return creating_like(*(t for t in (*outs, *inputs) if t is not None))
    return _NULL


def _run(roots: Sequence, cts: Sequence, retain_graph: bool, create_graph: bool, wanted=None,
         stop=()):  # fmt: skip
    """Propagate `cts` from `roots`; returns {id(tensor): (tensor, grad)} of leaves (or `wanted`).

    With `stop` (ids of tensors), those tensors count as leaves: the propagation ends there
    and returns their gradients as they are (a checkpointed block's backward pass, whose
    caller passes them on)."""
    from flow.core.errors import op_error

    creating_like, grad_to_leaf = _Hooks.creating_like, _Hooks.grad_to_leaf
    from flow.core.trace import current_trace

    trace = current_trace()
    grads: dict[int, tuple] = {}
    for r, ct in zip(roots, cts):
        _accumulate(grads, r, ct)
    units = _topo(roots, stop)
    leaves: dict[int, tuple] = {}

    def output_ct(node: Node):
        """The complete gradient of `node`'s output, through its hooks (None if none came)."""
        out = node.out
        entry = None if out is None else grads.pop(id(out), None)
        if entry is None:
            return None
        ct = entry[1]
        if wanted is not None and id(out) in wanted:
            leaves[id(out)] = (out, ct)  # as PyTorch: before the output's hooks
        if trace is not None and not _born_in(trace, out):
            trace.grad_reached[id(out)] = out
        if node.hooks:
            ct = _apply_hooks(node.hooks, ct, out)
        if node.retain:
            _keep_grad(out, ct, create_graph)
        return ct

    with _GradMode(create_graph):
        for unit in units:
            if isinstance(unit, NodeGroup):
                group_cts = [output_ct(n) for n in unit.nodes]
                if all(ct is None for ct in group_cts):
                    continue
                if unit.freed:
                    raise _freed_error()
                with _creating_like(creating_like, [n.out for n in unit.nodes], unit.inputs):
                    in_cts = unit.vjp(group_cts, *unit.inputs)
                name, inputs = unit.op, unit.inputs
            else:
                node = unit
                ct = output_ct(node)
                if ct is None:
                    continue
                if node.freed:
                    raise _freed_error()
                if node.vjp is None:
                    raise op_error("backward", f"'{node.op}' has no derivative rule (it is not "
                                   "differentiable, or its VJP is not implemented)",
                                   cls=RuntimeError)  # fmt: skip
                scope = trace.scoped(node.scope) if node.scope and trace is not None else _NULL
                # constants: global like out
                with _creating_like(creating_like, (node.out,), node.inputs), scope:
                    in_cts = node.vjp(ct, *node.inputs, out=node.out, **node.params)
                name, inputs = node.op, node.inputs
            if not isinstance(in_cts, (tuple, list)):
                in_cts = (in_cts,)
            for t, g in zip(inputs, in_cts):
                if g is None or not getattr(t, "_requires_grad", False):
                    continue
                if g.shape != t.shape:
                    raise op_error("backward", f"the VJP of '{name}' returned a gradient of "
                                   f"shape {list(g.shape)} for an input of shape "
                                   f"{list(t.shape)}", cls=RuntimeError)  # fmt: skip
                if g.dtype is not t.dtype:
                    g = g.to(t.dtype)
                if id(t) in stop:
                    _accumulate(leaves, t, g)
                elif t._node is None:
                    _accumulate(leaves, t, grad_to_leaf(g, t))
                else:
                    _accumulate(grads, t, g)
            if not retain_graph:
                unit.freed = True
    for t, g in grads.values():  # roots that are leaves themselves
        if id(t) in stop:
            _accumulate(leaves, t, g)
        elif t._node is None:
            _accumulate(leaves, t, grad_to_leaf(g, t))
    for key, (t, g) in leaves.items():
        if trace is not None and not _born_in(trace, t):
            trace.grad_reached[key] = t
        hooks = getattr(t, "_grad_hooks", None) if t._node is None else None
        if hooks and (wanted is None or key in wanted) and key not in stop:
            with _GradMode(create_graph):
                leaves[key] = (t, _apply_hooks(hooks, g, t))
    return leaves


def run_backward(roots: Sequence, cts: Sequence, stop: dict, create_graph: bool) -> dict:
    """The gradients reaching the tensors of `stop` ({id: tensor}) from `roots` seeded with
    `cts`, as {id: gradient}: a checkpointed block's recomputed graph, walked once (leaves
    beyond `stop` that it reaches, e.g. a tensor made inside the block, accumulate as usual)."""
    found = _run(roots, cts, retain_graph=False, create_graph=create_graph, stop=stop)
    out = {}
    for key, (t, g) in found.items():
        if key in stop:
            out[key] = g
        else:
            _keep_grad(t, g, create_graph)
            _post_accumulate(t)
    return out


def _initial_cts(outputs: Sequence, grad_outputs) -> list:
    from flow.core.errors import op_error

    creating_like, ones_like, tensor = _Hooks.creating_like, _Hooks.ones_like, _Hooks.tensor
    cts = []
    for i, out in enumerate(outputs):
        if not getattr(out, "_requires_grad", False):
            raise op_error("backward", f"element {i} of tensors does not require grad and does "
                                       "not have a grad_fn", cls=RuntimeError)  # fmt: skip
        g = None if grad_outputs is None else grad_outputs[i]
        if g is None:
            if out.numel() != 1:
                raise op_error("backward", "grad can be implicitly created only for scalar "
                               f"outputs (got shape {list(out.shape)}); pass gradient=",
                               cls=RuntimeError)  # fmt: skip
            with creating_like(out):  # a global output's seed is global (broadcast)
                g = ones_like(out)
        elif not hasattr(g, "_dtype"):
            g = tensor(g, dtype=out.dtype)
        if tuple(g.shape) != tuple(out.shape):
            raise op_error("backward", f"gradient of shape {list(g.shape)} does not match the "
                           f"output's shape {list(out.shape)}", cls=RuntimeError)  # fmt: skip
        cts.append(g)
    return cts


# `hook(output) -> output` applied to what `backward` differentiates (None: none); nn.Graph's
# grad scaler multiplies the loss by the loss scale with it.
OUTPUT_HOOK: list[Callable | None] = [None]


def backward(tensors, grad_tensors=None, retain_graph: bool | None = None,
             create_graph: bool = False) -> None:  # fmt: skip
    """Accumulate d(tensors)/d(leaf) into every leaf's `.grad` (like torch.autograd.backward)."""
    outputs = list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]
    if OUTPUT_HOOK[0] is not None:
        outputs = [OUTPUT_HOOK[0](o) for o in outputs]
    if grad_tensors is not None and not isinstance(grad_tensors, (list, tuple)):
        grad_tensors = [grad_tensors]
    with _backward_phase():
        cts = _initial_cts(outputs, grad_tensors)
        retain = create_graph if retain_graph is None else retain_graph
        leaves = _run(outputs, cts, retain, create_graph)
        for t, g in leaves.values():
            _keep_grad(t, g, create_graph)
            _post_accumulate(t)
        _run_callbacks()


def _backward_phase():
    """Inside a pipeline's traced micro-batch, tag the backward pass's ops as such (its
    schedule orders forward and backward micro-batches, lowering/pipeline_schedule.py)."""
    from flow.core.trace import current_trace

    trace = current_trace()
    if trace is None or PHASE_ATTR not in trace.tags:
        return contextlib.nullcontext()
    from xdsl.dialects.builtin import StringAttr

    return trace.tagged(**{PHASE_ATTR: StringAttr("backward")})


def grad(outputs, inputs, grad_outputs=None, retain_graph: bool | None = None,
         create_graph: bool = False, allow_unused: bool = False):  # fmt: skip
    """The gradients of `outputs` with respect to `inputs`, returned (not accumulated)."""
    from flow.core.errors import op_error

    outs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    ins = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    if grad_outputs is not None and not isinstance(grad_outputs, (list, tuple)):
        grad_outputs = [grad_outputs]
    for i, t in enumerate(ins):
        if not getattr(t, "_requires_grad", False):
            raise op_error("grad", f"input {i} does not require grad", cls=RuntimeError)
    cts = _initial_cts(outs, grad_outputs)
    retain = create_graph if retain_graph is None else retain_graph
    found = _run(outs, cts, retain, create_graph, wanted={id(t) for t in ins})
    result = []
    for i, t in enumerate(ins):
        entry = found.get(id(t))
        if entry is None:
            if not allow_unused:
                raise op_error("grad", f"input {i} was not used to compute the outputs; pass "
                                       "allow_unused=True", cls=RuntimeError)  # fmt: skip
            result.append(None)
        else:
            result.append(entry[1] if create_graph else entry[1].detach())
    return tuple(result)
