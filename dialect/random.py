"""The flow dialect's random ops (see dialect/ops.py for the shared base classes)."""

from __future__ import annotations

OPS: tuple = ()
ATTRS: tuple = ()

__all__: list[str] = []
