"""How flow's IR locations read: the user's source line, inside the module scope's name.

The tracer gives every op the user's line as a `FileLineColLoc`; inside an nn.Graph module it
wraps it in a `NameLoc` named with the module's path in the graph, as JAX names locations
with its name stack: `loc("first.0"("model.py":12:3))`. Passes copy locations as they are.
"""

from __future__ import annotations

from xdsl.dialects.builtin import FileLineColLoc, NameLoc
from xdsl.ir import Operation

__all__ = ["scope_of", "source_location"]


def source_location(op: Operation) -> FileLineColLoc | None:
    """The op's user source line, also inside a module scope's name; None when it has none."""
    loc = op.location
    while isinstance(loc, NameLoc):
        loc = loc.location
    return loc if isinstance(loc, FileLineColLoc) else None


def scope_of(op: Operation) -> str:
    """The module path an op's location is named with ("" for none)."""
    loc = op.location
    return loc.desc.data if isinstance(loc, NameLoc) else ""
