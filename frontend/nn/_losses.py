"""`flow.nn.functional` losses, composed from primitives."""

from __future__ import annotations

__all__: list[str] = []
