"""Whole-model checkpoints without pickle: `flow.save(model, path)` / `flow.load(path)`.

A module is stored as a record of its class's import path, the arguments of its outermost
constructor call (recorded by `nn.Module.__init_subclass__`) and its `state_dict()`.
Arguments are JSON data, tensors, dtypes, devices and other modules (stored as records of
their own, whose weights come from the outer module's state). Loading builds a record only
from a class the caller allows: flow's own `flow.nn` classes, or those named in
`flow.load(path, allowed=[...])` (classes or "package.module.Class" names). The check comes
before any import, so an untrusted checkpoint never imports or runs code of its choosing.
"""

from __future__ import annotations

import importlib
from typing import Any

from flow._checkpoint_tree import CheckpointError, _Decoder, _Encoder, _join, _where

__all__ = ["DisallowedClassError"]


class DisallowedClassError(CheckpointError):
    """A whole-model checkpoint names a class that `flow.load` was not allowed to build."""


def is_module(obj: Any) -> bool:
    from flow.nn import Module

    return isinstance(obj, Module)


def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


# ---------------------------------------------------------------------------- save


def encode_module(enc: _Encoder, module: Any, path: str) -> dict:
    """The record of `module`: class, constructor arguments and (outside another module's
    arguments) its state dict and train/eval modes."""
    from flow.nn import Module

    cls = type(module)
    name = _class_name(cls)
    where = _where(path)
    advice = "; save its state_dict() instead and rebuild the model in code to load it"
    if "<locals>" in cls.__qualname__ or cls.__module__ is None:
        raise TypeError(f"flow.save: cannot save the module {name} {where} whole: its class "
                        f"is defined inside a function, so flow.load could not find it by "
                        f"name (define it at module level){advice}")  # fmt: skip
    call = module.__dict__.get("_init_call")
    if call is None and cls.__init__ is Module.__init__:
        call = ((), {})
    if call is None:
        raise TypeError(f"flow.save: cannot save the module {name} {where} whole: the "
                        f"arguments of its constructor were not recorded{advice}")  # fmt: skip
    args, kwargs = call
    token = enc._enter("(args)")  # arguments' tensors get a folder apart from the state's
    try:
        record = {
            "module": cls.__module__,
            "qualname": cls.__qualname__,
            "args": enc.encode_args(list(args), _join(path, f"{cls.__name__}(args)")),
            "kwargs": enc.encode_args(dict(kwargs), _join(path, f"{cls.__name__}(kwargs)")),
        }
    except TypeError as err:
        if advice in str(err):  # from a module among the arguments: already explained
            raise
        raise TypeError(f"{err}; a module is saved whole from its constructor arguments, "
                        f"which must be data, tensors or modules{advice}") from None  # fmt: skip
    finally:
        enc._leave(token)
    if not enc._in_args:
        _check_arg_modules(module, args, kwargs, name, where, advice)
        record["state"] = enc.encode(module.state_dict(), _join(path, "state"))
        record["eval"] = [n for n, m in module.named_modules() if not m.training]
    return {"module": record}


def _check_arg_modules(module, args, kwargs, name: str, where: str, advice: str) -> None:
    """Modules passed to constructors get their weights from `module`'s state dict, so each
    must be one of its submodules."""
    inside = {id(m) for m in module.modules()}
    stack = [*args, *kwargs.values()]
    seen: set[int] = set()
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple)):
            stack.extend(obj)
        elif is_module(obj):
            if id(obj) not in inside:
                raise TypeError(
                    f"flow.save: cannot save the module {name} {where} whole: its constructor "
                    f"took a {_class_name(type(obj))} that is not one of its submodules, so "
                    f"its weights would be lost{advice}"
                )
            call = obj.__dict__.get("_init_call")
            if call is not None:
                stack.extend([*call[0], *call[1].values()])


# ---------------------------------------------------------------------------- load


def allowed_names(allowed: Any) -> set[str]:
    """The dotted class names `allowed` (a class, a name, or an iterable of them) admits."""
    if allowed is None:
        return set()
    items = [allowed] if isinstance(allowed, (str, type)) else allowed
    try:
        items = list(items)
    except TypeError:
        raise TypeError("flow.load: allowed must be a class, a 'package.module.Class' name, "
                        f"or a list of them; got {type(allowed).__name__}") from None  # fmt: skip
    names = set()
    for item in items:
        if isinstance(item, type):
            names.add(_class_name(item))
        elif isinstance(item, str):
            names.add(item)
        else:
            raise TypeError(f"flow.load: allowed= holds {item!r:.60}; expected classes or "
                            "'package.module.Class' names")  # fmt: skip
    return names


def _is_flow_nn(module: str) -> bool:
    return module == "flow.nn" or module.startswith("flow.nn.")


def _resolve(dec: _Decoder, rec: dict, path: str) -> type:
    from flow.nn import Module

    module, qualname = rec.get("module"), rec.get("qualname")
    parts = qualname.split(".") if isinstance(qualname, str) else []
    if (not isinstance(module, str) or not all(p.isidentifier() for p in module.split("."))
            or not parts or not all(p.isidentifier() and not p.startswith("__") for p in parts)):
        raise dec.fail(path, f"bad module class {module!r:.60}.{qualname!r:.60}")  # fmt: skip
    name = f"{module}.{qualname}"
    if not _is_flow_nn(module) and name not in dec.allowed:
        raise DisallowedClassError(
            f"{dec.source}: the checkpoint builds a {name} {_where(path)}, a class this load "
            f"is not allowed to import and run; if you trust the file, pass "
            f"flow.load(..., allowed=[{qualname.split('.')[-1]}]) (the class) or "
            f"allowed=['{name}']"
        )
    try:
        obj: Any = importlib.import_module(module)
        for part in parts:
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as err:
        raise CheckpointError(f"{dec.source}: cannot find the class {name} of the module "
                              f"{_where(path)} ({type(err).__name__}: {err})"
                              ) from None  # fmt: skip
    if not (isinstance(obj, type) and issubclass(obj, Module)):
        raise dec.fail(path, f"{name} is not an nn.Module class")
    return obj


def decode_module(dec: _Decoder, rec: dict, path: str) -> Any:
    """Build the module of record `rec`: construct it from its arguments, then load its state
    dict (strict) and train/eval modes."""
    if not {"module", "qualname", "args", "kwargs"} <= rec.keys() <= {
            "module", "qualname", "args", "kwargs", "state", "eval"}:  # fmt: skip
        raise dec.fail(path, f"bad module record with keys {sorted(rec)!r:.80}")
    cls = _resolve(dec, rec, path)
    args = dec.decode(rec["args"], _join(path, f"{cls.__name__}(args)"))
    kwargs = dec.decode(rec["kwargs"], _join(path, f"{cls.__name__}(kwargs)"))
    if not isinstance(args, list) or not isinstance(kwargs, dict) or not all(
            isinstance(k, str) for k in kwargs):  # fmt: skip
        raise dec.fail(path, "module arguments are not a list and a dict of str keys")
    try:
        module = cls(*args, **kwargs)
    except Exception as err:
        raise CheckpointError(f"{dec.source}: building {cls.__qualname__} {_where(path)} from "
                              f"its saved arguments failed ({type(err).__name__}: {err})"
                              ) from err  # fmt: skip
    if "state" in rec:
        state = dec.decode(rec["state"], _join(path, "state"))
        if not isinstance(state, dict):
            raise dec.fail(path, "module state is not a dict")
        try:
            module.load_state_dict(state)
        except (RuntimeError, TypeError, ValueError) as err:
            raise CheckpointError(f"{dec.source}: the saved state does not fit the "
                                  f"{cls.__qualname__} built {_where(path)}: {err}") from None
        eval_names = rec.get("eval", [])
        if not isinstance(eval_names, list):
            raise dec.fail(path, "bad list of modules in eval mode")
        flagged = set(eval_names)
        for name, sub in module.named_modules():
            object.__setattr__(sub, "training", name not in flagged)
    return module
