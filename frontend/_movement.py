"""flow's movement primitives (numpy kernel + dialect op) and the public ops built on them."""

from __future__ import annotations

TENSOR_METHODS: dict = {}
"""Tensor methods this module adds (name -> function taking the tensor first)."""

__all__: list[str] = []
