"""Neural-network building blocks (`flow.nn`): Modules, layers, losses, `functional`, `init`
and `utils`."""

from __future__ import annotations

from . import (
    _containers,
    _conv_layers,
    _layers,
    _loss_modules,
    _module,
    _norm_layers,
    _parallel,
    _rnn,
    _transformer,
    functional,
    graph,
    init,
    parallel,
    utils,
)
from ._containers import *  # noqa: F403  (each module lists its public names in __all__)
from ._custom import build
from ._conv_layers import *  # noqa: F403
from ._graph import Graph, GraphConfig
from ._loaded_graph import LoadedGraph
from ._layers import *  # noqa: F403
from ._loss_modules import *  # noqa: F403
from ._module import *  # noqa: F403
from ._norm_layers import *  # noqa: F403
from ._rnn import *  # noqa: F403
from ._transformer import *  # noqa: F403

__all__ = [
    "functional", "graph", "init", "parallel", "utils", "Graph", "GraphConfig", "LoadedGraph",
    "build",
    *_module.__all__, *_containers.__all__, *_layers.__all__,
    *_conv_layers.__all__, *_norm_layers.__all__, *_loss_modules.__all__,
    *_transformer.__all__, *_rnn.__all__,
]  # fmt: skip
