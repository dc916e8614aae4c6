"""Utilities around the core library: `flow.utils.data` (datasets, samplers, `DataLoader`),
`flow.utils.global_view` (`to_global` / `to_local` of whole state dicts), and `flow.utils.rng`,
the `generator` argument that the data pipeline and `flow.transforms` share."""

from __future__ import annotations

from . import data, global_view

__all__ = ["data", "global_view"]
