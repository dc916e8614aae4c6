"""`flow.nn.functional` norms, composed from primitives."""

from __future__ import annotations

__all__: list[str] = []
