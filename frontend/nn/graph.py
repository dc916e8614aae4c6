"""`flow.nn.graph`: OneFlow's namespace of graph helpers (`GraphModule` for pipeline stages)."""

from __future__ import annotations

from ._graph import Graph, GraphConfig
from ._pipeline import GraphModule

__all__ = ["Graph", "GraphConfig", "GraphModule"]
