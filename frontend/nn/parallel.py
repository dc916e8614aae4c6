"""`flow.nn.parallel`: data parallelism over local tensors (OneFlow's
`oneflow.nn.parallel.DistributedDataParallel`, in `_ddp.py`), and the SBP layout that
`Module.to_global(..., model_parallel=True)` gives (`tensor_parallel_sbp`, in `_parallel.py`),
for building layouts of more placement axes from it."""

from __future__ import annotations

from ._ddp import DistributedDataParallel
from ._parallel import tensor_parallel_sbp

__all__ = ["DistributedDataParallel", "tensor_parallel_sbp"]
