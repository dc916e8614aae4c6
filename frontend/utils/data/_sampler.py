"""Samplers: the order in which a `DataLoader` visits a map-style dataset's indices."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence, Sized
from numbers import Integral
from typing import Any

import numpy as np

from flow.utils.rng import as_generator, numpy_rng


def _positive_int(owner: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value <= 0:
        raise ValueError(f"{owner}: {name} should be a positive integer value, but got "
                         f"{name}={value!r}")  # fmt: skip
    return int(value)


def _bool(owner: str, name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{owner}: {name} should be a boolean value, but got {name}={value!r}")
    return value


class Sampler:
    """Iterates over dataset indices (or, for a batch sampler, lists of them)."""

    def __init__(self, data_source: Sized | None = None):
        pass

    def __iter__(self) -> Iterator:
        raise NotImplementedError(f"{type(self).__name__} (a Sampler) must implement __iter__")


class SequentialSampler(Sampler):
    """Indices `0, 1, ..., len(data_source) - 1` in order."""

    def __init__(self, data_source: Sized):
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation of the indices each epoch, or `num_samples` indices drawn with
    replacement; `generator` (see `DataLoader`) makes the sequence of epochs reproducible."""

    def __init__(self, data_source: Sized, replacement: bool = False,
                 num_samples: int | None = None, generator=None):  # fmt: skip
        self.data_source = data_source
        self.replacement = _bool("RandomSampler", "replacement", replacement)
        self._num_samples = num_samples
        self.generator = as_generator(generator, "RandomSampler")
        _positive_int("RandomSampler", "num_samples", self.num_samples)

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n, k = len(self.data_source), self.num_samples
        rng = numpy_rng(self.generator)
        if self.replacement:
            yield from rng.integers(0, n, size=k).tolist()
            return
        for _ in range(k // n):
            yield from rng.permutation(n).tolist()
        yield from rng.permutation(n)[: k % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order each epoch."""

    def __init__(self, indices: Sequence[int], generator=None):
        self.indices = indices
        self.generator = as_generator(generator, "SubsetRandomSampler")

    def __iter__(self) -> Iterator[int]:
        for i in numpy_rng(self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """`num_samples` indices drawn with probabilities proportional to `weights`."""

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True,
                 generator=None):  # fmt: skip
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim != 1 or (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
            raise ValueError("WeightedRandomSampler: weights must be a 1-d sequence of finite, "
                             "non-negative numbers with a positive sum")  # fmt: skip
        self.weights = w
        self.num_samples = _positive_int("WeightedRandomSampler", "num_samples", num_samples)
        self.replacement = _bool("WeightedRandomSampler", "replacement", replacement)
        if not replacement and num_samples > np.count_nonzero(w):
            raise ValueError(f"WeightedRandomSampler: cannot draw {num_samples} samples without "
                             f"replacement from {np.count_nonzero(w)} non-zero weights")  # fmt: skip
        self.generator = as_generator(generator, "WeightedRandomSampler")

    def __iter__(self) -> Iterator[int]:
        p = self.weights / self.weights.sum()
        rng = numpy_rng(self.generator)
        yield from rng.choice(len(p), self.num_samples, replace=self.replacement, p=p).tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of `sampler` into lists of `batch_size`; the last, shorter list
    is kept unless `drop_last`."""

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool):
        self.sampler = sampler
        self.batch_size = _positive_int("BatchSampler", "batch_size", batch_size)
        self.drop_last = _bool("BatchSampler", "drop_last", drop_last)

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        if self.drop_last:
            return n // self.batch_size
        return (n + self.batch_size - 1) // self.batch_size
