"""Neural-network building blocks (`flow.nn`)."""

from __future__ import annotations

from . import functional

__all__ = ["functional"]
