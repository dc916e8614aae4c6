"""`flow-to-iree-input{blas=none}`: the hand-off of a local program to IREE.

A named pipeline with an option: its steps are in the registry (`PIPELINES` in
lowering/_registry.py), its option is a field of its pass class, here. Afterwards no flow op
or attribute remains:

    flow-fold-batch-matmuls              a weight shared across the batch: one 2-D product
    flow-fold-transposes                 transposes cancelled or folded
    flow-gemm-to-blas{policy=$blas}      large products call the host's BLAS (cpu only)
    flow-sink-negation, dce              clean-ups
    flow-fuse-elementwise                elementwise chains as one op
    flow-lower-to-linalg                 the rest to linalg, tensor, arith, math
"""

from __future__ import annotations

from dataclasses import dataclass

from ._registry import PipelinePass

__all__ = ["ToIreeInputPass"]


@dataclass(frozen=True)
class ToIreeInputPass(PipelinePass):
    """The hand-off of a local program: no flow op or attribute is left."""

    name = "flow-to-iree-input"
    blas: str = "none"
    """Which matrix products call the host's BLAS: none, auto (as this machine's calibration
    says) or all (`flow-gemm-to-blas`); only the cpu target of this host can run them."""
