"""Utilities around the core library: `flow.utils.data` (datasets, samplers, `DataLoader`),
`flow.utils.global_view` (`to_global` / `to_local` of whole state dicts), `flow.utils.rng`,
the `generator` argument that the data pipeline and `flow.transforms` share, and
`flow.utils.checkpoint` (activation checkpointing)."""

from __future__ import annotations

from . import checkpoint, data, global_view

__all__ = ["checkpoint", "data", "global_view"]
