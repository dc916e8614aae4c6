"""Data loading as in `torch.utils.data` / `oneflow.utils.data`: datasets, samplers,
`DataLoader` (optionally with worker processes) and the default collate functions."""

from __future__ import annotations

from ._collate import default_collate, default_convert
from ._dataloader import DataLoader
from ._dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    random_split,
)
from ._sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from ._worker import WorkerInfo, get_worker_info
from .distributed import DistributedSampler

__all__ = [
    "Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset", "Subset",
    "random_split", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
    "WeightedRandomSampler", "BatchSampler", "DataLoader", "default_collate", "default_convert",
    "get_worker_info", "WorkerInfo", "DistributedSampler", "distributed",
]  # fmt: skip
