"""Datasets: map-style (`Dataset`) and iterable-style (`IterableDataset`), and their combinators."""

from __future__ import annotations

import bisect
import math
import warnings
from collections.abc import Iterable, Iterator, Sequence
from numbers import Integral
from typing import Any

import numpy as np

from flow.core.tensor import Tensor
from flow.ops.basic import from_numpy
from flow.utils.rng import as_generator, numpy_rng


class Dataset:
    """A map-style dataset: `dataset[i]` is sample `i`; subclasses define `__getitem__` and,
    for the default samplers, `__len__`. `a + b` concatenates two datasets."""

    def __getitem__(self, index) -> Any:
        raise NotImplementedError(f"{type(self).__name__} (a Dataset) must implement __getitem__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """An iterable-style dataset: a stream of samples from `__iter__`.

    With `num_workers > 0` every worker iterates its own copy; splitting the
    stream between workers (with `get_worker_info()`) is the dataset's job.
    """

    def __iter__(self) -> Iterator:
        raise NotImplementedError(
            f"{type(self).__name__} (an IterableDataset) must implement __iter__"
        )

    def __add__(self, other: Dataset) -> ChainDataset:
        return ChainDataset([self, other])


def _dim0(t: Any) -> int:
    shape = getattr(t, "shape", None)
    if shape is None or len(shape) == 0:
        raise ValueError(
            f"TensorDataset: expected tensors with at least one dim, got {type(t).__name__}"
            + ("" if shape is None else " of shape []")
        )
    return int(shape[0])


class TensorDataset(Dataset):
    """Samples are tuples of the tensors' rows: `dataset[i] == (t[i] for t in tensors)`."""

    def __init__(self, *tensors: Tensor | np.ndarray):
        if not tensors:
            raise ValueError("TensorDataset: expected at least one tensor")
        sizes = [_dim0(t) for t in tensors]
        if len(set(sizes)) > 1:
            raise ValueError(
                f"TensorDataset: all tensors must have the same size in dim 0, got sizes {sizes}"
            )
        self.tensors = tensors

    def __getitem__(self, index) -> tuple:
        return tuple(_row(t, index) for t in self.tensors)

    def __len__(self) -> int:
        return _dim0(self.tensors[0])


def _row(t: Any, index) -> Any:
    """`t[index]`; eager flow tensors are indexed through numpy, which is much faster."""
    if isinstance(t, Tensor) and not t.is_traced:
        return from_numpy(np.asarray(t.numpy()[index]))
    return t[index]


class ConcatDataset(Dataset):
    """The samples of several map-style datasets, one after the other."""

    def __init__(self, datasets: Iterable[Dataset]):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: expected a non-empty iterable of datasets")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset; use ChainDataset")
        self.cumulative_sizes = np.cumsum([len(d) for d in self.datasets]).tolist()

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int) -> Any:
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"ConcatDataset: index {index} is out of range for length {n}")
        if index < 0:
            index += n
        which = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]


class ChainDataset(IterableDataset):
    """The streams of several iterable datasets, one after the other."""

    def __init__(self, datasets: Iterable[Dataset]):
        self.datasets = list(datasets)

    def __iter__(self) -> Iterator:
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(
                    f"ChainDataset only chains IterableDatasets, got {type(d).__name__}"
                )
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset: Dataset, indices: Sequence[int]):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, index) -> Any:
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


def _split_lengths(lengths: Sequence[float], n: int) -> list[int]:
    """Fractions summing to 1 become counts: floor(n * f), the remainder spread one each
    over the first splits (PyTorch's rule); ints are returned as they are."""
    if all(isinstance(x, Integral) and not isinstance(x, bool) for x in lengths):
        return [int(x) for x in lengths]
    if not math.isclose(sum(lengths), 1.0) or any(not 0 <= f <= 1 for f in lengths):
        raise ValueError(
            f"random_split: lengths must be ints summing to len(dataset) = {n} or fractions in "
            f"[0, 1] summing to 1, got {list(lengths)}"
        )
    counts = [math.floor(n * f) for f in lengths]
    for i in range(n - sum(counts)):
        counts[i % len(counts)] += 1
    for i, c in enumerate(counts):
        if c == 0:
            warnings.warn(f"random_split: split {i} of length 0", UserWarning, stacklevel=3)
    return counts


def random_split(dataset: Dataset, lengths: Sequence[float], generator=None) -> list[Subset]:
    """Split `dataset` into disjoint random `Subset`s of the given lengths (counts, or
    fractions of `len(dataset)` summing to 1); a seeded `generator` makes it reproducible."""
    gen = as_generator(generator, "random_split")
    n = len(dataset)
    counts = _split_lengths(lengths, n)
    if any(c < 0 for c in counts) or sum(counts) != n:
        raise ValueError(
            f"random_split: the lengths {counts} sum to {sum(counts)}, but the dataset has "
            f"length {n}"
        )
    perm = numpy_rng(gen).permutation(n).tolist()
    offsets = np.cumsum([0, *counts]).tolist()
    return [Subset(dataset, perm[lo:hi]) for lo, hi in zip(offsets[:-1], offsets[1:])]
