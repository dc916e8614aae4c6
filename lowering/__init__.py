"""flow's lowering: passes (one per module), their registry and named pipelines.

The package imports no pass: `get_all_passes()` maps names to factories that
import on demand. `run_pipeline` applies a spec such as
`"flow-to-iree-input"` to a module; `to_iree_text` prints the result for IREE.
"""

from __future__ import annotations

from ._handoff import HandoffError, PipelineError, run_pipeline, to_iree_text
from ._registry import (
    PIPELINES,
    PipelinePass,
    UnknownPassError,
    expand_pipeline,
    get_all_passes,
    parse_pipeline_spec,
)

__all__ = [
    "PIPELINES",
    "HandoffError",
    "PipelineError",
    "PipelinePass",
    "UnknownPassError",
    "expand_pipeline",
    "get_all_passes",
    "parse_pipeline_spec",
    "run_pipeline",
    "to_iree_text",
]
