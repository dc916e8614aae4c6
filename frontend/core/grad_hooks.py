"""Gradient hooks: `register_hook`, `retain_grad`, post-accumulate-grad hooks and
`queue_callback`, which `flow.core.autograd`'s backward pass runs (and which inside a trace
apply only to values the traced function computes)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

__all__ = ["RemovableHandle", "check_reached", "queue_callback", "register_hook",
           "register_post_accumulate_grad_hook", "retain_grad"]


class RemovableHandle:
    """What `Tensor.register_hook` returns: `remove()` unregisters the hook (also on leaving
    a `with` block)."""

    _ids = itertools.count()

    def __init__(self, hooks: dict) -> None:
        self.id = next(self._ids)
        self._hooks = hooks

    def remove(self) -> None:
        self._hooks.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


_OUTSIDE_TRACE = (
    "inside flow.jit / nn.Graph, hooks and retain_grad() apply only to tensors the traced "
    "function computes, not to a tensor from outside it (a parameter, a captured tensor: its "
    "hooks would run once, at trace time, and stay baked into the cached program); register "
    "the hook inside the function on a value it computes, or run this step eagerly"
)
_hooked_outside = False  # whether a hook or retain_grad() was ever put on an untraced tensor


def _born_in(trace, t) -> bool:
    """Whether `t` is a value the traced function computes (not an eager tensor it reads or
    updates)."""
    return t._trace is trace and id(t) not in trace.mutated


def _check_in_trace(what: str, t) -> None:
    """Hooks and retained gradients inside a trace: see `_OUTSIDE_TRACE`."""
    from flow.core.trace import current_trace

    trace = current_trace()
    if trace is None:
        global _hooked_outside
        _hooked_outside = True
    elif not _born_in(trace, t):
        raise RuntimeError(f"{what} on a tensor of shape {list(t.shape)}: {_OUTSIDE_TRACE}")


def check_reached(tensors, what: str) -> None:
    """Before a cached program runs again: raise if a tensor its traced backward pass reached
    from outside the trace (`Trace.grad_reached`) has a hook or retains its gradient now."""
    if not _hooked_outside:
        return
    for t in tensors:
        if (_hooks_of(t) or getattr(t, "_post_grad_hooks", None)
                or (t._node is not None and t._node.retain)):  # fmt: skip
            raise RuntimeError(f"{what}: a tensor of shape {list(t.shape)} that the compiled "
                               f"backward pass reaches has a gradient hook now; "
                               f"{_OUTSIDE_TRACE}")  # fmt: skip


def register_hook(t, hook: Callable) -> RemovableHandle:
    """`t.register_hook(hook)`: during backward, `hook(grad)` sees the gradient of `t`; a
    tensor it returns replaces that gradient (what flows on, and what a leaf accumulates)."""
    if not callable(hook):
        raise TypeError(f"register_hook: expected a callable, got {type(hook).__name__}")
    if not t._requires_grad:
        raise RuntimeError("register_hook: cannot register a hook on a tensor that does not "
                           "require grad")  # fmt: skip
    _check_in_trace("register_hook", t)
    hooks = _hooks_of(t)
    if hooks is None:
        hooks = {}
        if t._node is None:
            t._grad_hooks = hooks
        else:
            t._node.hooks = hooks
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def retain_grad(t) -> None:
    """`t.retain_grad()`: a non-leaf tensor keeps its gradient in `.grad` (a leaf does already)."""
    if not t._requires_grad:
        raise RuntimeError("retain_grad: can't retain_grad on a tensor that has "
                           "requires_grad=False")  # fmt: skip
    if t._node is not None:
        _check_in_trace("retain_grad", t)
        t._node.retain = True


def register_post_accumulate_grad_hook(t, hook: Callable) -> RemovableHandle:
    """`t.register_post_accumulate_grad_hook(hook)`: after `backward()` has accumulated a
    gradient into the leaf `t`'s `.grad`, `hook(t)` runs (its result is ignored), in the order
    the hooks were registered. Only `backward()` accumulates; `flow.autograd.grad` runs none."""
    if not callable(hook):
        raise TypeError("register_post_accumulate_grad_hook: expected a callable, got "
                        f"{type(hook).__name__}")  # fmt: skip
    if not t._requires_grad:
        raise RuntimeError("register_post_accumulate_grad_hook: cannot register a hook on a "
                           "tensor that does not require grad")  # fmt: skip
    if t._node is not None:
        raise RuntimeError("register_post_accumulate_grad_hook: only leaf tensors accumulate "
                           f"gradients; got a non-leaf tensor (grad_fn={t._node.name()}); use "
                           "register_hook for the gradient of a non-leaf")  # fmt: skip
    _check_in_trace("register_post_accumulate_grad_hook", t)
    hooks = getattr(t, "_post_grad_hooks", None)
    if hooks is None:
        hooks = t._post_grad_hooks = {}
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def queue_callback(fn: Callable[[], None]) -> None:
    """Run `fn()` once at the end of the `backward()` now running on this thread, after every
    leaf's gradient and post-accumulate hooks; called outside one, at the end of the next.
    (What data-parallel training needs to finish its gradient all-reduces.)"""
    if not callable(fn):
        raise TypeError(f"queue_callback: expected a callable, got {type(fn).__name__}")
    _callbacks().append(fn)


class _Queue(threading.local):
    def __init__(self):  # (run once per thread)
        self.callbacks: list[Callable[[], None]] = []


_queue = _Queue()


def _callbacks() -> list:
    return _queue.callbacks


def _run_callbacks() -> None:
    """The callbacks of `queue_callback`, in order (those they queue too)."""
    queue = _callbacks()
    while queue:
        queue.pop(0)()


def _post_accumulate(t) -> None:
    hooks = getattr(t, "_post_grad_hooks", None)
    if hooks:
        _check_in_trace("a post-accumulate-grad hook", t)
        for hook in list(hooks.values()):
            hook(t)


def _hooks_of(t) -> dict | None:
    node = t._node
    return getattr(t, "_grad_hooks", None) if node is None else node.hooks


def _apply_hooks(hooks: dict, g, t):
    """`g` passed through the hooks of `t`, in the order they were registered."""
    _check_in_trace("a gradient hook", t)
    for hook in list(hooks.values()):
        new = hook(g)
        if new is None:
            continue
        name = getattr(hook, "__name__", type(hook).__name__)
        if not hasattr(new, "_dtype"):
            raise TypeError(f"backward: hook {name!r} returned {type(new).__name__}; expected "
                            "a tensor (the new gradient) or None")  # fmt: skip
        if tuple(new.shape) != tuple(g.shape) or new.dtype is not g.dtype:
            raise RuntimeError(f"backward: hook {name!r} returned a gradient of shape "
                               f"{list(new.shape)} and dtype {new.dtype!r}; expected those of "
                               f"the gradient it was given: {list(g.shape)}, {g.dtype!r}")
        g = new
    return g
