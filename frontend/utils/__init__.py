"""Utilities around the core library: `flow.utils.data` (datasets, samplers, `DataLoader`), and
`flow.utils.rng`, the `generator` argument that the data pipeline and `flow.transforms` share."""

from __future__ import annotations

from . import data

__all__ = ["data"]
