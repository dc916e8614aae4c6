"""The `flow` MLIR dialect, defined in xDSL: attributes, ops, verifiers.

IREE's MLIR already owns the namespace `flow`, so our dialect lives in xDSL
and never crosses the hand-off to IREE (see lowering/).

The package's names (`flow.dialect.AddOp`, `make_context`, ...; dialect/definition.py
gathers them) are loaded on first use, with xDSL: importing a light submodule (attr_names,
semantics) or `import flow` loads neither.
"""

from __future__ import annotations

import importlib
import importlib.util


def __getattr__(name: str):
    if name.startswith("__") and name != "__all__":
        raise AttributeError(name)
    if importlib.util.find_spec(f"{__name__}.{name}") is not None:  # a submodule: just it
        return importlib.import_module(f"{__name__}.{name}")
    definition = importlib.import_module(f"{__name__}.definition")
    globals().update({n: getattr(definition, n) for n in definition.__all__})
    globals()["__all__"] = definition.__all__
    if name in globals():
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    definition = importlib.import_module(f"{__name__}.definition")
    return sorted({*globals(), *definition.__all__})
