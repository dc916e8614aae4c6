"""`flow.nn.functional` activations, composed from primitives."""

from __future__ import annotations

__all__: list[str] = []
