"""Custom layers: a Module's own `backward`, and the layer registry behind
`flow.nn.Module.register_layer` and `flow.nn.build`.

A Module subclass that defines `backward(self, grad_output)` next to `forward` is
differentiated as one op, like a `flow.autograd.Function` (which runs it, so eager mode,
`flow.jit` and `nn.Graph` all use it): `forward` runs without recording, and what `backward`
returns is the gradient of each positional argument of `forward` (None for one that needs
none), followed by one per trainable parameter of the module, in `parameters()` order.

`register_layer(name, cls)` makes `cls` reachable as `flow.nn.<name>` and by name in the
configs `flow.nn.build` turns into modules.
"""

from __future__ import annotations

import difflib
import sys
from typing import Any

from flow.core.function import Function
from flow.core.tensor import Tensor

from ._module import _HOOKS, Module

__all__ = ["build", "call_with_backward", "register_layer"]

_LAYERS: dict[str, type] = {}  # name -> Module subclass, from register_layer


class _ModuleOp(Function):
    """A module with its own backward, as one recorded op over its arguments and parameters."""

    @staticmethod
    def forward(ctx, module, kwargs, n_args, *values):
        ctx.module, ctx.n_args, ctx.n_params = module, n_args, len(values) - n_args
        out = module.forward(*values[:n_args], **kwargs)
        if not isinstance(out, Tensor):
            raise TypeError(
                f"{type(module).__name__}.forward returned {type(out).__name__}; a module with "
                "its own backward returns one tensor (its backward gets that tensor's gradient)"
            )
        return out

    @staticmethod
    def backward(ctx, grad):
        module, n_args, n_params = ctx.module, ctx.n_args, ctx.n_params
        grads = module.backward(grad)
        if not isinstance(grads, (tuple, list)):
            grads = (grads,)
        if len(grads) != n_args + n_params:
            name = type(module).__name__
            params = [n for n, p in module.named_parameters() if p.requires_grad]
            want = f"{n_args} (one per positional argument of forward)"
            if n_params:
                want = f"{n_args + n_params}: {n_args} for the arguments of forward, then one " \
                       f"per trainable parameter ({', '.join(params)})"  # fmt: skip
            raise RuntimeError(f"{name}.backward returned {len(grads)} gradient"
                               f"{'s' if len(grads) != 1 else ''}; expected {want}")  # fmt: skip
        return (None, None, None, *grads)


def call_with_backward(module: Any, args: tuple, kwargs: dict) -> Tensor:
    """Call `module.forward(*args, **kwargs)` with the module's own backward as its gradient."""
    for key, value in kwargs.items():
        if isinstance(value, Tensor) and value.requires_grad:
            raise TypeError(
                f"{type(module).__name__} has its own backward, which gives the gradients of "
                f"the positional arguments of forward; pass the tensor {key}= positionally"
            )
    params = [p for p in module.parameters() if p.requires_grad]
    return _ModuleOp.apply(module, kwargs, len(args), *args, *params)


# --------------------------------------------------------------------------- the registry


def _nn():
    return sys.modules["flow.nn"]


def _builtin(name: str) -> type | None:
    value = getattr(_nn(), name, None) if name in getattr(_nn(), "__all__", ()) else None
    return value if isinstance(value, type) and issubclass(value, Module) else None


def register_layer(name: str, cls: type | None = None):
    """Make the Module subclass `cls` available as `flow.nn.<name>` and to `flow.nn.build`.

    Registering the same class again is a no-op; a name taken by another class (a registered
    one or one of flow.nn's own layers) raises. Without `cls`, returns a class decorator."""
    if cls is None:
        return lambda c: register_layer(name, c)
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"register_layer: the name must be a Python identifier, got {name!r}")
    if not (isinstance(cls, type) and issubclass(cls, Module)):
        raise TypeError(f"register_layer({name!r}, ...): expected a subclass of flow.nn.Module, "
                        f"got {cls!r}")  # fmt: skip
    taken = _LAYERS.get(name) or _builtin(name)
    if taken is None and hasattr(_nn(), name):
        raise ValueError(f"register_layer: {name!r} is already an attribute of flow.nn "
                         f"({type(getattr(_nn(), name)).__name__}); choose another name")
    if taken is not None and taken is not cls:
        raise ValueError(
            f"register_layer: the name {name!r} is taken by {taken.__module__}."
            f"{taken.__qualname__}; cannot register {cls.__module__}.{cls.__qualname__} under "
            "it (choose another name)"
        )
    _LAYERS[name] = cls
    setattr(_nn(), name, cls)
    return cls


def _lookup(name: Any) -> type:
    if not isinstance(name, str):
        raise TypeError(f"flow.nn.build: a layer's 'type' is its name (a string), got {name!r}")
    cls = _LAYERS.get(name) or _builtin(name)
    if cls is None:
        known = sorted({*_LAYERS, *(n for n in getattr(_nn(), "__all__", ()) if _builtin(n))})
        close = difflib.get_close_matches(name, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"flow.nn.build: no layer named {name!r}{hint} (flow.nn's layers and "
                       "those added with flow.nn.Module.register_layer)")  # fmt: skip
    return cls


def _build_value(value: Any) -> Any:
    if isinstance(value, dict) and "type" in value:
        return build(value)
    if isinstance(value, list) and value and all(
        isinstance(v, dict) and "type" in v for v in value
    ):
        return [build(v) for v in value]
    return value


def build(config: Any):
    """A module from a config: `{"type": "Linear", "in_features": 4, "out_features": 8}` (the
    other keys are keyword arguments; `"args": [...]` gives positional ones), or a list of
    such dicts, which becomes an `nn.Sequential`. Values that are configs themselves are built
    first (`{"type": "Sequential", "args": [{...}, {...}]}`)."""
    if isinstance(config, (list, tuple)):
        return _lookup("Sequential")(*(build(c) for c in config))
    if not isinstance(config, dict) or "type" not in config:
        raise TypeError(f"flow.nn.build: expected a dict with a 'type' key (a layer's name) or "
                        f"a list of them, got {config!r}")  # fmt: skip
    kwargs = {k: _build_value(v) for k, v in config.items() if k not in ("type", "args")}
    args = config.get("args", [])
    if not isinstance(args, (list, tuple)):
        raise TypeError(f"flow.nn.build: 'args' of {config['type']!r} must be a list, got "
                        f"{args!r}")  # fmt: skip
    cls = _lookup(config["type"])
    try:
        return cls(*(_build_value(a) for a in args), **kwargs)
    except TypeError as err:
        raise TypeError(f"flow.nn.build: {config['type']}(args={list(args)}, "
                        f"kwargs={kwargs}): {err}") from None  # fmt: skip


_HOOKS.update(backward=call_with_backward, register_layer=register_layer)
