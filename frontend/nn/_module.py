"""`flow.nn.Module` and `flow.nn.Parameter`: the building blocks of every model.

A Module registers the Parameters, buffers and submodules assigned to its
attributes, so it can walk them (`parameters()`, `named_modules()`, ...),
save and restore them (`state_dict()` / `load_state_dict()`) and switch them
between training and evaluation. Inside `flow.jit` a module's parameters are
eager tensors captured by the traced function, so they become arguments of
the compiled function and it always sees their current values.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from flow.core import dtypes as _dtypes
from flow.core.autograd import no_grad
from flow.ops.basic import tensor as _to_tensor
from flow.core.tensor import Tensor

from ._module_hooks import ForwardHooks, RecordsInit, call_scope


_calls: dict | None = None  # set by `recording_calls`: id(module) -> its first call's I/O


@contextlib.contextmanager
def recording_calls():
    """Within it, a module's first call records the shapes and dtypes of its inputs and outputs
    (a dict of id(module) -> (inputs, outputs), each a list of their descriptions); nn.Graph
    records its trace to print them."""
    global _calls
    outer, _calls = _calls, {}
    try:
        yield _calls
    finally:
        _calls = outer


def _describe(obj) -> list[str]:
    """`tensor(size=(2, 3), dtype=flow.float32)` for each tensor among `obj`'s leaves."""
    from flow.core.pytree import flatten

    leaves, _ = flatten(obj if isinstance(obj, (tuple, list, dict)) else [obj])
    return [f"tensor(size={tuple(t.shape)}, dtype={t.dtype!r})"
            for t in leaves if isinstance(t, Tensor)]  # fmt: skip


class Parameter(Tensor):
    """A tensor that a Module registers as trainable (requires grad by default).

    It shares memory with the tensor it is built from, like PyTorch's; ops on a
    Parameter return plain tensors.
    """

    __slots__ = ()

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            data = _to_tensor(np.zeros((0,), np.float32))
        elif not isinstance(data, Tensor):
            data = _to_tensor(data)
        if data.is_traced:
            raise TypeError("Parameter: expected an eager tensor, got a value traced in flow.jit")
        arr = data._data  # of a global tensor: this rank's shard, with its placement and SBP
        p = object.__new__(cls)
        p._data = arr if arr.flags.writeable else np.array(arr)
        p._value, p._trace, p._node, p.grad = None, None, None, None
        p._shape, p._dtype = data.shape, data.dtype
        p._dist, p._device = getattr(data, "_dist", None), getattr(data, "_device", None)
        p._requires_grad = False
        p.requires_grad = requires_grad
        return p

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (np.array(self._data), self._requires_grad))

    def __deepcopy__(self, memo: dict) -> Parameter:
        if id(self) not in memo:
            p = Parameter(self.detach().clone(), self._requires_grad)
            if self.grad is not None:
                p.grad = self.grad.detach().clone()
            memo[id(self)] = p
        return memo[id(self)]

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


def _rebuild_parameter(arr: np.ndarray, requires_grad: bool) -> Parameter:
    return Parameter(Tensor._eager(arr), requires_grad)


_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _check_name(kind: str, name: Any) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain ".", got {name!r}')


def _indent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    return "\n".join([lines[0]] + [" " * spaces + line for line in lines[1:]])


def _parse_to(args: tuple, kwargs: dict) -> tuple[_dtypes.dtype | None, object]:
    """The dtype and the device asked for by `Module.to(...)` (None: unchanged)."""
    from flow.core.device import device as _device_cls

    device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            dtype = a.dtype
        elif isinstance(a, _device_cls):
            device = a
        elif isinstance(a, str):
            try:
                dtype = _dtypes.as_dtype(a)
            except TypeError:
                device = a
        elif a is not None:
            dtype = a
    if dtype is None:
        return None, device
    dt = _dtypes.as_dtype(dtype)
    if not dt.is_floating_point:
        raise TypeError(
            f"Module.to only accepts floating point dtypes, but got desired dtype={dt!r}"
        )
    return dt, device


def _cast_(t: Tensor, dt: _dtypes.dtype) -> None:
    """Cast a floating-point tensor (and its grad) to `dt` in place, keeping its identity."""
    if not t.dtype.is_floating_point or t.dtype is dt:
        return
    t._data = np.ascontiguousarray(t.numpy().astype(dt.np_dtype))
    t._dtype = dt
    if t.grad is not None:
        _cast_(t.grad, dt)


# What Module calls in the flow.nn modules built on it, registered when they load (custom
# backward and register_layer: nn/_custom.py; the parallel flags of to_global: nn/_parallel.py)
_HOOKS: dict[str, Callable] = {}


def _is_placement(value: Any) -> bool:
    from flow.distributed.placement import placement

    return value is None or isinstance(value, placement)


class Module(ForwardHooks, RecordsInit):
    """Base class of layers and models: subclass, assign layers in `__init__`, define `forward`."""

    training: bool
    _parameters: dict[str, Parameter | None]
    _buffers: dict[str, Tensor | None]
    _modules: dict[str, Module | None]

    def __init__(self) -> None:
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    def __call__(self, *args, **kwargs):
        d = self.__dict__
        if d.get("_forward_pre_hooks"):  # register_forward_pre_hook (_module_hooks.py)
            args, kwargs = self._run_forward_pre_hooks(args, kwargs)
        stage = self.__dict__.get("_stage")
        if stage is not None:  # a pipeline stage: arguments from elsewhere move to it
            from ._pipeline import move_to_stage

            args = tuple(move_to_stage(stage, a) for a in args)
            kwargs = {k: move_to_stage(stage, v) for k, v in kwargs.items()}
        plan = self.__dict__.get("_parallel")
        if plan is not None:  # to_global(..., parallel=True): inputs take the plan's SBP
            args, kwargs = plan.inputs(self, args, kwargs)
        hook = ("backward" if callable(getattr(type(self), "backward", None))  # nn/_custom.py
                else "checkpointed" if d.get("_activation_checkpointing") else None)  # _pipeline
        with call_scope(self):  # in nn.Graph's trace, ops are named with the module's path
            out = _HOOKS[hook](self, args, kwargs) if hook else self.forward(*args, **kwargs)
        if d.get("_forward_hooks"):  # register_forward_hook
            out = self._run_forward_hooks(args, kwargs, out)
        if _calls is not None:
            _calls.setdefault(id(self), (_describe(args), _describe(out)))
        return out

    @staticmethod
    def register_layer(name: str, cls: type | None = None):
        """Make the Module subclass `cls` available as `flow.nn.<name>` and by name to
        `flow.nn.build` (see nn/_custom.py); a name taken by another class raises."""
        return _HOOKS["register_layer"](name, cls)

    # ------------------------------------------------------------------ registration
    def _require_init(self, what: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or a `None` placeholder, like an absent bias) under `name`."""
        self._require_init("parameter")
        _check_name("parameter", name)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (flow.nn.Parameter or None required)")  # fmt: skip
        if param is not None and param.grad_fn is not None:
            raise ValueError(f"cannot assign non-leaf tensor to parameter '{name}'; compute it in "
                             "forward() or wrap a detached copy in a Parameter")  # fmt: skip
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a tensor that is state but not a parameter (e.g. BatchNorm's running mean).

        Persistent buffers are part of `state_dict()`; others are not.
        """
        self._require_init("buffer")
        _check_name("buffer", name)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(flow.Tensor or None required)")  # fmt: skip
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module under `name` (reachable as an attribute)."""
        self._require_init("module")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        _check_name("module", name)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def _forget(self, name: str, *, keep: str) -> None:
        for store in ("_parameters", "_buffers", "_modules"):
            if store != keep:
                self.__dict__[store].pop(name, None)
        self.__dict__.pop(name, None)
        if keep != "_buffers":
            self._non_persistent_buffers_set.discard(name)

    def __setattr__(self, name: str, value: Any) -> None:
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            self._require_init("parameters")
            self._forget(name, keep="_parameters")
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(flow.nn.Parameter or None expected)")  # fmt: skip
            params[name] = None
        elif isinstance(value, Module):
            self._require_init("module")
            self._forget(name, keep="_modules")
            self._modules[name] = value
        elif params is not None and name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module "
                                f"'{name}' (flow.nn.Module or None expected)")  # fmt: skip
            self._modules[name] = None
        elif params is not None and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(flow.Tensor or None expected)")  # fmt: skip
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for store in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__.get(store, ()):
                del self.__dict__[store][name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        keys = set(super().__dir__())
        for store in ("_parameters", "_buffers", "_modules"):
            keys.update(self.__dict__.get(store, ()))
        return sorted(keys)

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_non_persistent_buffers_set", set())

    # ------------------------------------------------------------------ traversal
    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:  # fmt: skip
        """This module and all below it, depth first, each once, with its dotted name."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                sub = f"{prefix}.{name}" if prefix else name
                yield from child.named_modules(memo, sub, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen: set[int] = set()
        for name, child in self._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def _named_members(self, store: str, prefix: str, recurse: bool, remove_duplicate: bool):
        seen: set[int] = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]  # fmt: skip
        for mod_prefix, mod in mods:
            for name, value in mod.__dict__[store].items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield (f"{mod_prefix}.{name}" if mod_prefix else name), value

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, Parameter) pairs; a parameter shared by two modules is listed once."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:  # fmt: skip
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target: str) -> Module:
        """The submodule at a dotted path such as `"encoder.layers.0"` ("" is this module)."""
        mod: Module = self
        for part in target.split(".") if target else []:
            child = mod._modules.get(part)
            if child is None:
                raise AttributeError(f"{mod._get_name()} has no submodule `{part}` (in '{target}')")
            mod = child
        return mod

    def get_parameter(self, target: str) -> Parameter:
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if name not in mod._parameters:
            raise AttributeError(f"{mod._get_name()} has no parameter `{name}` (in '{target}')")
        return mod._parameters[name]

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call `fn` on every submodule (children first) and then on this module."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------ state
    def state_dict(self, destination: dict | None = None, prefix: str = "",
                   keep_vars: bool = False) -> OrderedDict:  # fmt: skip
        """Parameters and persistent buffers by dotted name, e.g. `layers.0.weight`.

        Values are detached tensors sharing memory with the module's (the
        tensors themselves with `keep_vars=True`).
        """
        out = OrderedDict() if destination is None else destination
        for name, p in self._parameters.items():
            if p is not None:
                out[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                out[prefix + name] = b if keep_vars else b.detach()
        for name, child in self._modules.items():
            if child is not None:
                child.state_dict(out, prefix + name + ".", keep_vars)
        return out

    def _local_state(self) -> dict[str, Tensor]:
        state = {k: v for k, v in self._parameters.items() if v is not None}
        state.update((k, v) for k, v in self._buffers.items()
                     if v is not None and k not in self._non_persistent_buffers_set)  # fmt: skip
        return state

    def load_state_dict(self, state_dict: dict, strict: bool = True,
                        assign: bool = False) -> _IncompatibleKeys:  # fmt: skip
        """Copy `state_dict`'s values into this module's parameters and buffers, in place.

        With `strict`, missing and unexpected keys raise; a shape mismatch always
        raises. `assign=True` makes the loaded tensors the module's own instead of
        copying (Parameters keep their requires_grad). Returns the
        (missing_keys, unexpected_keys) that were found.
        """
        if not isinstance(state_dict, dict):
            raise TypeError(
                f"Expected state_dict to be dict-like, got {type(state_dict).__name__}."
            )
        missing: list[str] = []
        expected: set[str] = set()
        errors: list[str] = []
        for prefix, mod in self.named_modules(remove_duplicate=False):
            head = prefix + "." if prefix else ""
            for name, target in mod._local_state().items():
                key = head + name
                expected.add(key)
                if key not in state_dict:
                    missing.append(key)
                    continue
                src = state_dict[key]
                if not isinstance(src, Tensor):
                    try:
                        src = _to_tensor(np.asarray(src))
                    except (TypeError, ValueError):
                        errors.append(f'While copying the parameter named "{key}", expected a '
                                      f"tensor, got {type(src).__name__}.")  # fmt: skip
                        continue
                if tuple(src.shape) != tuple(target.shape):
                    errors.append(f"size mismatch for {key}: copying a param with shape "
                                  f"{list(src.shape)} from checkpoint, the shape in current model "
                                  f"is {list(target.shape)}.")  # fmt: skip
                    continue
                if not assign:
                    with no_grad():
                        target.copy_(src)
                elif name in mod._parameters:
                    mod._parameters[name] = Parameter(src.detach(), target.requires_grad)
                else:
                    mod._buffers[name] = src.detach()
        unexpected = [k for k in state_dict if k not in expected]
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in unexpected) + ". ")  # fmt: skip
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in missing) + ". ")  # fmt: skip
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {self._get_name()}:\n\t"
                               + "\n\t".join(errors))  # fmt: skip
        return _IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------------ modes and dtypes
    def train(self, mode: bool = True) -> Module:
        """Set training mode (dropout active, batch statistics) on this module and all below it."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        object.__setattr__(self, "training", mode)
        for child in self.children():
            child.train(mode)  # through each child's own train(), which it may override
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's `.grad` (to None, or to zeros with `set_to_none=False`)."""
        for p in self.parameters():
            if p.grad is not None:
                p.grad = None if set_to_none else Tensor._eager(np.zeros_like(p.grad.numpy()))

    def to(self, *args, **kwargs):
        """`to(dtype)` casts float parameters and buffers in place; `to(device)` puts them on
        the device in place (`flow.device`: programs compiled from them run there; an error
        when the device is missing here);
        `to(flow.nn.graph.GraphModule)` returns the module's graph settings (pipeline stage)."""
        from ._pipeline import GraphModule

        if len(args) == 1 and not kwargs and args[0] is GraphModule:
            return GraphModule(self)
        dt, device = _parse_to(args, dict(kwargs))
        if dt is not None:
            for t in [*self.parameters(), *self.buffers()]:
                _cast_(t, dt)
        if device is not None:
            from flow.core.device import place

            place([*self.parameters(), *self.buffers()], device)
        return self

    def to_global(self, placement=None, sbp=None, *, parallel: bool = False,
                  model_parallel: bool = False, pipeline_parallel: bool = False) -> Module:
        """Make every parameter and buffer global in place (OneFlow's `Module.to_global`).

        `to_global(flow.device("cuda"), parallel=True)` spreads the model over every rank of
        that device: data parallel (`parallel`), tensor parallel (`model_parallel`) or in
        pipeline stages (`pipeline_parallel`); see nn/_parallel.py.

        Parameters remain the same `Parameter` objects (trainable leaves, so an optimizer
        built before keeps working); `.grad`s are converted too. `sbp` is one SBP (entry
        or list, one per placement axis) for all tensors, or a callable
        `sbp(name, tensor)` giving each one's (e.g. for tensor parallelism); a global
        tensor with `placement` or `sbp` None keeps that part of its distribution.
        """
        from flow.distributed.global_tensor import to_global_
        if parallel or model_parallel or pipeline_parallel or not _is_placement(placement):
            return _HOOKS["parallelize"](self, placement, sbp, parallel=parallel,
                                         model_parallel=model_parallel,
                                         pipeline_parallel=pipeline_parallel)  # fmt: skip
        self.__dict__.pop("_parallel", None)  # an explicit distribution replaces a flag's
        named = [*self.named_parameters(), *self.named_buffers()]
        with no_grad():
            for name, t in named:
                if t is not None:
                    to_global_(t, placement, sbp(name, t) if callable(sbp) else sbp)
        return self

    def float(self) -> Module:
        return self.to(_dtypes.float32)

    def double(self) -> Module:
        return self.to(_dtypes.float64)

    def half(self) -> Module:
        return self.to(_dtypes.float16)

    def bfloat16(self) -> Module:
        return self.to(_dtypes.bfloat16)

    def cpu(self) -> Module:
        return self.to("cpu")

    def cuda(self, device=None) -> Module:
        return self.to("cuda" if device is None else f"cuda:{int(device)}")

    # ------------------------------------------------------------------ printing
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The text inside this module's parentheses in `repr` (its constructor settings)."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        children = [f"({name}): {_indent(repr(m), 2)}" for name, m in self._modules.items()]
        if not children and len(lines) <= 1:
            return f"{self._get_name()}({extra})"
        body = "\n  ".join(lines + children)
        return f"{self._get_name()}(\n  {body}\n)"


__all__ = ["Module", "Parameter"]
