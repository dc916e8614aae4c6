"""Container modules: `Sequential`, `ModuleList`, `ModuleDict`, `ParameterList`, `ParameterDict`.

Each registers its items under their position (`"0"`, `"1"`, ...) or key, so
they show up in `parameters()` and `state_dict()` as `layers.0.weight`.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from flow.core.tensor import Tensor
from ._module import Module, Parameter


def _index(op: str, idx: Any, n: int) -> int:
    """A valid non-negative position for `idx` in a container of length `n`."""
    i = operator.index(idx)
    if not -n <= i < n:
        raise IndexError(f"{op}: index {idx} is out of range for length {n}")
    return i % n if n else i


def _renumber(container: Module, items: list) -> None:
    """Register `items` under the names "0", "1", ... in place of the current children."""
    container._modules.clear()
    for i, m in enumerate(items):
        container.add_module(str(i), m)


class Sequential(Module):
    """Modules applied in order: `Sequential(a, b, c)(x) == c(b(a(x)))`.

    Built from modules (named "0", "1", ...) or from one OrderedDict of named modules.
    """

    def __init__(self, *args: Module) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def _key(self, idx: int) -> str:
        return list(self._modules)[_index(type(self).__name__, idx, len(self._modules))]

    def __getitem__(self, idx: int | slice) -> Any:
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._key(idx)]

    def __setitem__(self, idx: int, module: Module) -> None:
        self.add_module(self._key(idx), module)

    def __delitem__(self, idx: int | slice) -> None:
        positional = all(k.isdigit() for k in self._modules)
        keys = list(self._modules)[idx] if isinstance(idx, slice) else [self._key(idx)]
        for key in keys:
            del self._modules[key]
        if positional:  # keep the names 0..n-1, as after building from a list
            _renumber(self, list(self._modules.values()))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only Sequential, got {type(other).__name__}")
        return Sequential(*self, *other)

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> Sequential:
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        items = list(self._modules.values())
        n = len(items)
        if not -n <= index <= n:
            raise IndexError(f"Sequential.insert: index {index} is out of range for length {n}")
        items.insert(index % (n + 1) if index < 0 else index, module)
        _renumber(self, items)
        return self

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules, registered by position; index it like a Python list."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx: int | slice) -> Any:
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index("ModuleList", idx, len(self)))]

    def __setitem__(self, idx: int, module: Module) -> None:
        self.add_module(str(_index("ModuleList", idx, len(self))), module)

    def __delitem__(self, idx: int | slice) -> None:
        items = list(self._modules.values())
        if isinstance(idx, slice):
            del items[idx]
        else:
            del items[_index("ModuleList", idx, len(items))]
        _renumber(self, items)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        return ModuleList([*self, *other])

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError("ModuleList.extend should be called with an iterable of modules, "
                            f"got {type(modules).__name__}")  # fmt: skip
        for m in list(modules):
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        items = list(self._modules.values())
        items.insert(index, module)
        _renumber(self, items)


class ModuleDict(Module):
    """An ordered dict of modules, registered by key."""

    def __init__(self, modules: Mapping[str, Module] | Iterable | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        return self._modules.pop(key)

    def update(self, modules: Mapping[str, Module] | Iterable) -> None:
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for pair in pairs:
            key, module = pair
            self[key] = module


class ParameterList(Module):
    """A list of Parameters, registered by position (tensors are wrapped in a Parameter)."""

    def __init__(self, values: Iterable[Tensor] | None = None) -> None:
        super().__init__()
        for v in values or ():
            self.append(v)

    def __getitem__(self, idx: int) -> Parameter:
        return self._parameters[str(_index("ParameterList", idx, len(self)))]

    def __setitem__(self, idx: int, value: Tensor) -> None:
        key = str(_index("ParameterList", idx, len(self)))
        self.register_parameter(key, value if isinstance(value, Parameter) else Parameter(value))

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[Parameter]:
        return iter(self._parameters.values())

    def append(self, value: Tensor) -> ParameterList:
        p = value if isinstance(value, Parameter) else Parameter(value)
        self.register_parameter(str(len(self)), p)
        return self

    def extend(self, values: Iterable[Tensor]) -> ParameterList:
        for v in values:
            self.append(v)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"({k}): Parameter containing: [{p.dtype!r} of size "
                         f"{'x'.join(map(str, p.shape))}]"
                         for k, p in self._parameters.items())  # fmt: skip


class ParameterDict(Module):
    """An ordered dict of Parameters, registered by key (tensors are wrapped in a Parameter)."""

    def __init__(self, parameters: Mapping[str, Tensor] | Iterable | None = None) -> None:
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Parameter:
        return self._parameters[key]

    def __setitem__(self, key: str, value: Tensor) -> None:
        self.register_parameter(key, value if isinstance(value, Parameter) else Parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._parameters[key]

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[str]:
        return iter(self._parameters)

    def __contains__(self, key: str) -> bool:
        return key in self._parameters

    def keys(self):
        return self._parameters.keys()

    def items(self):
        return self._parameters.items()

    def values(self):
        return self._parameters.values()

    def pop(self, key: str) -> Parameter:
        return self._parameters.pop(key)

    def update(self, parameters: Mapping[str, Tensor] | Iterable) -> None:
        pairs = parameters.items() if isinstance(parameters, Mapping) else parameters
        for key, value in pairs:
            self[key] = value

    def extra_repr(self) -> str:
        return "\n".join(f"({k}): Parameter containing: [{p.dtype!r} of size "
                         f"{'x'.join(map(str, p.shape))}]"
                         for k, p in self._parameters.items())  # fmt: skip


__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]
