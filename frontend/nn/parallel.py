"""`flow.nn.parallel`: data parallelism over local tensors (OneFlow's
`oneflow.nn.parallel.DistributedDataParallel`, in `_ddp.py`)."""

from __future__ import annotations

from ._ddp import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
