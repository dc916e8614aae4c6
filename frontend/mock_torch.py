"""`flow.mock_torch`: run PyTorch code on flow without editing it (OneFlow's `mock_torch`).

    import flow.mock_torch as mock
    with mock.enable():            # or mock.enable() ... mock.disable()
        import torch               # flow itself; torch.nn is flow.nn, torch.optim flow.optim
        x = torch.zeros(2, 3)      # a flow.Tensor

For a whole program (and the third-party libraries it imports), `eval $(python -m
flow.mock_torch)` puts a `torch` package first on PYTHONPATH that turns into flow on import;
`eval $(python -m flow.mock_torch disable)` takes it away again.

`import torch.X` gives `flow.X` where flow has it. `lazy=True` makes a name flow lacks a
placeholder that fails only when used (so a library that imports `torch.something` it never
calls still loads); `verbose=True` prints each placeholder made. Switching mode swaps the
`torch` entries of `sys.modules` and the caller's global names bound to them: each mode keeps
its own, so a name imported under one mode is not defined under the other.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import sys
import types
from typing import Any

__all__ = ["enable", "disable", "is_enabled"]

_ROOT = "torch"
_SHIM_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_mock_path")


def _is_torch_name(name: str) -> bool:
    return name == _ROOT or name.startswith(_ROOT + ".")


class _Placeholder(types.ModuleType):
    """What `lazy=True` gives for a torch name flow lacks: attributes are placeholders too,
    and calling or using one raises, naming the torch API that flow does not provide."""

    def __init__(self, name: str, verbose: bool):
        super().__init__(name)
        self.__dict__.update(_verbose=verbose, __path__=[])  # a package: submodules mock too
        if verbose:
            print(f"flow.mock_torch: {name} is a placeholder (flow has no counterpart)")

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Placeholder(f"{self.__name__}.{attr}", self.__dict__["_verbose"])

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(f"flow.mock_torch: {self.__name__} has no counterpart in flow "
                                  "(it was mocked with lazy=True)")  # fmt: skip

    def __bool__(self) -> bool:
        return False


class _Lazy(types.ModuleType):
    """A flow module seen as a torch module under `lazy=True`: flow's names, placeholders
    for the others."""

    def __init__(self, name: str, real: types.ModuleType, verbose: bool):
        super().__init__(name, getattr(real, "__doc__", None))
        self.__dict__.update(_real=real, _verbose=verbose, __file__=getattr(real, "__file__", None))

    def __getattr__(self, attr: str) -> Any:
        real = self.__dict__["_real"]
        try:
            return getattr(real, attr)
        except AttributeError:
            if attr.startswith("__"):
                raise
            return _Placeholder(f"{self.__name__}.{attr}", self.__dict__["_verbose"])


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves `torch` and `torch.X` to `flow` and `flow.X` while mocking is on."""

    def __init__(self, lazy: bool, verbose: bool):
        self.lazy, self.verbose = lazy, verbose

    def find_spec(self, fullname, path=None, target=None):
        if not _is_torch_name(fullname):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        flow_name = "flow" + spec.name[len(_ROOT):]
        try:
            real = importlib.import_module(flow_name)
        except ModuleNotFoundError:
            if not self.lazy:
                raise ModuleNotFoundError(
                    f"flow.mock_torch: 'import {spec.name}' has no counterpart in flow (no "
                    f"module {flow_name}); mock_torch.enable(lazy=True) makes it a placeholder",
                    name=spec.name,
                ) from None
            return _Placeholder(spec.name, self.verbose)
        return _Lazy(spec.name, real, self.verbose) if self.lazy else real

    def exec_module(self, module):
        pass


# Each mode's `torch` modules and the caller globals bound to them, saved while the other
# mode is on: {"mock": {...}, "real": {...}}.
_saved: dict[str, dict] = {"mock": {"modules": {}, "globals": {}},
                           "real": {"modules": {}, "globals": {}}}  # fmt: skip
_finder: _Finder | None = None


def is_enabled() -> bool:
    """Whether `import torch` gives flow now."""
    return _finder is not None


def _caller_globals() -> dict:
    frame = sys._getframe(3)  # the user's frame: _switch <- enable/disable (or __exit__) <- user
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    return frame.f_globals if frame is not None else {}


def _switch(to_mock: bool, lazy: bool = False, verbose: bool = False) -> None:
    global _finder
    leaving, entering = ("real", "mock") if to_mock else ("mock", "real")
    user = _caller_globals()
    out = {k: sys.modules.pop(k) for k in [k for k in sys.modules if _is_torch_name(k)]}
    _saved[leaving]["modules"] = out
    values = {id(m) for m in out.values()}
    bound = {k: v for k, v in user.items() if isinstance(v, types.ModuleType) and id(v) in values}
    for k in bound:
        del user[k]
    _saved[leaving]["globals"] = bound
    if _finder is not None:
        sys.meta_path.remove(_finder)
        _finder = None
    if to_mock:
        _finder = _Finder(lazy, verbose)
        sys.meta_path.insert(0, _finder)
    if not to_mock:  # the mock's modules are made afresh (with this enable's lazy / verbose)
        sys.modules.update(_saved[entering]["modules"])
    user.update(_saved[entering]["globals"])


class _Mode:
    """The value of `enable()` / `disable()`: the switch is made at once; used as a context
    manager, the previous mode comes back at the end of the `with` block."""

    def __init__(self, was_enabled: bool, lazy: bool, verbose: bool):
        self._was, self._lazy, self._verbose = was_enabled, lazy, verbose

    def __enter__(self) -> _Mode:
        return self

    def __exit__(self, *exc) -> None:
        if self._was != is_enabled():
            _switch(self._was, self._lazy, self._verbose)


def enable(lazy: bool = False, verbose: bool = False) -> _Mode:
    """`import torch` (and `torch.X`) gives flow from now on, or within a `with` block."""
    was = is_enabled()
    if was:
        _finder.lazy, _finder.verbose = lazy, verbose
    else:
        _switch(True, lazy, verbose)
    return _Mode(was, lazy, verbose)


def disable() -> _Mode:
    """`import torch` gives the real PyTorch again (if installed), or within a `with` block."""
    was = is_enabled()
    lazy, verbose = (_finder.lazy, _finder.verbose) if was else (False, False)
    if was:
        _switch(False)
    return _Mode(was, lazy, verbose)


def _shell(argv: list[str]) -> str:
    """The shell line `eval $(python -m flow.mock_torch [disable] [--lazy] [--verbose])` runs."""
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != _SHIM_DIR]
    flags = {a for a in argv if a.startswith("--")}
    unknown = flags - {"--lazy", "--verbose"} or [a for a in argv if a not in flags | {"disable"}]
    if unknown:
        raise SystemExit(f"python -m flow.mock_torch: unknown arguments {sorted(unknown)}; "
                         "usage: python -m flow.mock_torch [disable] [--lazy] [--verbose]")
    if "disable" in argv:
        return (f"export PYTHONPATH={os.pathsep.join(parts)}; "
                "unset FLOW_MOCK_TORCH_LAZY FLOW_MOCK_TORCH_VERBOSE")  # fmt: skip
    return (f"export PYTHONPATH={os.pathsep.join([_SHIM_DIR, *parts])}; "
            f"export FLOW_MOCK_TORCH_LAZY={int('--lazy' in flags)}; "
            f"export FLOW_MOCK_TORCH_VERBOSE={int('--verbose' in flags)}")


def main() -> None:
    """`flow-mock-torch [disable] [--lazy] [--verbose]` / `python -m flow.mock_torch ...`."""
    print(_shell(sys.argv[1:]))


if __name__ == "__main__":
    main()
