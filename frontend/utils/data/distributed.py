"""`flow.utils.data.distributed.DistributedSampler`: each rank's share of a map-style data set
for data-parallel training, as in `torch.utils.data.distributed` / OneFlow."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sized
from numbers import Integral

import numpy as np

__all__ = ["DistributedSampler"]


class DistributedSampler:
    """Indices for rank `rank` of `num_replicas` (default: this process's rank and the world
    size). With `shuffle`, one permutation of the whole data set per epoch, the same on every
    rank (from `seed + epoch`: call `set_epoch(epoch)` before each epoch for a new order), of
    which rank r takes every `num_replicas`-th index from r. The indices are padded by
    repeating the first ones so that every rank gets `ceil(n / num_replicas)` (or, with
    `drop_last`, cut to `floor(n / num_replicas)` each), so the ranks step together."""

    def __init__(self, dataset: Sized, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):  # fmt: skip
        from flow import env

        world = env.get_world_size() if num_replicas is None else num_replicas
        me = env.get_rank() if rank is None else rank
        for name, v in (("num_replicas", world), ("rank", me), ("seed", seed)):
            if isinstance(v, bool) or not isinstance(v, Integral):
                raise ValueError(f"DistributedSampler: {name} should be an int, got {v!r}")
        if world <= 0:
            raise ValueError(f"DistributedSampler: num_replicas should be positive, got {world}")
        if not 0 <= me < world:
            raise ValueError(f"DistributedSampler: invalid rank {me}, rank should be in the "
                             f"interval [0, {world - 1}]")  # fmt: skip
        self.dataset, self.num_replicas, self.rank = dataset, int(world), int(me)
        self.shuffle, self.seed, self.drop_last, self.epoch = bool(shuffle), int(seed), drop_last, 0
        n = len(dataset)
        if drop_last and n % world:
            self.num_samples = n // world
        else:
            self.num_samples = math.ceil(n / world)
        self.total_size = self.num_samples * world

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            indices = np.random.default_rng(self.seed + self.epoch).permutation(n).tolist()
        else:
            indices = list(range(n))
        if self.total_size > len(indices):  # pad with the first indices (repeated if needed)
            reps = math.ceil((self.total_size - len(indices)) / max(1, len(indices)))
            indices += (indices * reps)[: self.total_size - len(indices)]
        indices = indices[: self.total_size]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Make the next shuffle that of `epoch` (the same on every rank)."""
        self.epoch = int(epoch)
