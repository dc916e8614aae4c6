"""Forward hooks of `flow.nn.Module` (code that runs before and after its `forward`), and its
record of constructor arguments (`RecordsInit`, for whole-model checkpoints).

`register_forward_pre_hook(hook)`: `hook(module, args)` runs before `forward` and may return
new positional arguments (a tuple, or one value); `register_forward_hook(hook)`:
`hook(module, args, output)` runs after it and may return a new output. With
`with_kwargs=True` the hooks also see (and a pre-hook may replace) the keyword arguments;
`prepend=True` runs a hook before those already registered. Both return a handle whose
`remove()` unregisters the hook, as PyTorch's and OneFlow's do.

While nn.Graph traces (`naming_scopes`), a module's call names the ops it emits with the
module's path in the graph (`call_scope`, `Trace.scoped`), so the IR records module scope.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from flow.core.autograd import RemovableHandle
from flow.core.trace import current_trace

__all__ = ["ForwardHooks", "RecordsInit", "call_scope", "naming_scopes"]

_NULL = contextlib.nullcontext()
_scopes: dict | None = None  # set by `naming_scopes`: id(module) -> its path in the graph


@contextlib.contextmanager
def naming_scopes(names: dict):
    """Within it, the ops a module's call traces are named with its path (`names`: id(module)
    -> path, e.g. "first.0"); nn.Graph names its modules so."""
    global _scopes
    outer, _scopes = _scopes, names
    try:
        yield
    finally:
        _scopes = outer


def call_scope(module: Any) -> contextlib.AbstractContextManager:
    """The trace scope of a call of `module`: its path while `naming_scopes` names it and a
    trace is active, else nothing."""
    if _scopes is not None:
        name = _scopes.get(id(module))
        trace = current_trace()
        if name is not None and trace is not None:
            return trace.scoped(name)
    return _NULL


def _add(module: Any, store: str, hook: Callable, prepend: bool, with_kwargs: bool, what: str):
    if not callable(hook):
        raise TypeError(f"{what}: expected a callable hook, got {type(hook).__name__}")
    hooks = module.__dict__.get(store)
    if hooks is None:
        hooks = OrderedDict()
        object.__setattr__(module, store, hooks)
    handle = RemovableHandle(hooks)
    hooks[handle.id] = (hook, bool(with_kwargs))
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


def _name(hook: Callable) -> str:
    return getattr(hook, "__name__", type(hook).__name__)


class ForwardHooks:
    """The hook methods of `Module` (a mixin: the hooks live in the module's `__dict__`)."""

    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:  # fmt: skip
        """`hook(module, args)` (`hook(module, args, kwargs)` with `with_kwargs`) before every
        `forward`; a result that is not None replaces the arguments: a tuple (or one value)
        of positional arguments, or with `with_kwargs` an `(args, kwargs)` pair."""
        return _add(self, "_forward_pre_hooks", hook, prepend, with_kwargs,
                    "register_forward_pre_hook")  # fmt: skip

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False,
                              with_kwargs: bool = False) -> RemovableHandle:  # fmt: skip
        """`hook(module, args, output)` (`hook(module, args, kwargs, output)` with
        `with_kwargs`) after every `forward`; a result that is not None replaces the output."""
        return _add(self, "_forward_hooks", hook, prepend, with_kwargs, "register_forward_hook")

    def _run_forward_pre_hooks(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        for hook, with_kwargs in list(self.__dict__.get("_forward_pre_hooks", {}).values()):
            if with_kwargs:
                new = hook(self, args, kwargs)
                if new is None:
                    continue
                if not (isinstance(new, tuple) and len(new) == 2 and isinstance(new[1], dict)):
                    raise RuntimeError(f"forward pre-hook {_name(hook)!r} (with_kwargs=True) "
                                       f"returned {type(new).__name__}; expected None or an "
                                       "(args, kwargs) pair")  # fmt: skip
                args, kwargs = new
                args = args if isinstance(args, tuple) else (args,)
            else:
                new = hook(self, args)
                if new is not None:
                    args = new if isinstance(new, tuple) else (new,)
        return args, kwargs

    def _run_forward_hooks(self, args: tuple, kwargs: dict, output: Any) -> Any:
        for hook, with_kwargs in list(self.__dict__.get("_forward_hooks", {}).values()):
            new = hook(self, args, kwargs, output) if with_kwargs else hook(self, args, output)
            if new is not None:
                output = new
        return output


class RecordsInit:
    """Module's record of how each instance was constructed (for whole-model checkpoints)."""

    def __init_subclass__(cls, **kwargs) -> None:
        """Wrap each subclass's own `__init__` so an instance keeps the (args, kwargs) of its
        outermost constructor call in `_init_call`: `flow.save(module, path)` stores them,
        with the state dict, instead of pickling the object."""
        import functools

        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None or getattr(init, "_records_call", False):
            return

        @functools.wraps(init)
        def __init__(self, *args, **kw):  # noqa: N807
            if "_init_call" not in self.__dict__:  # not a super().__init__(...) from below
                object.__setattr__(self, "_init_call", (args, kw))
            init(self, *args, **kw)

        __init__._records_call = True
        cls.__init__ = __init__
