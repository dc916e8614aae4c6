"""Fetchers: turn one index (or list of indices) from the sampler into one collated item.

The single-process iterator and each worker process use the same fetchers, so
both produce identical batches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._dataset import IterableDataset


class MapFetcher:
    """`collate_fn([dataset[i] for i in indices])`, or `collate_fn(dataset[index])` when
    automatic batching is off; datasets may fetch a whole batch at once with `__getitems__`."""

    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Callable, drop_last: bool):
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn

    def fetch(self, index: Any) -> Any:
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        getitems = getattr(self.dataset, "__getitems__", None)
        data = getitems(index) if getitems else [self.dataset[i] for i in index]
        return self.collate_fn(data)


class IterableFetcher:
    """The next `len(indices)` samples of the dataset's stream, collated (the indices only
    count); raises StopIteration at the end of the stream, or at a short last batch when
    `drop_last`."""

    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Callable, drop_last: bool):
        self.iterator = iter(dataset)
        self.auto_collation, self.collate_fn, self.drop_last = auto_collation, collate_fn, drop_last
        self.ended = False

    def fetch(self, index: Any) -> Any:
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.iterator))
        data = []
        for _ in index:
            try:
                data.append(next(self.iterator))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < len(index)):
            raise StopIteration
        return self.collate_fn(data)


def make_fetcher(dataset: Any, auto_collation: bool, collate_fn: Callable, drop_last: bool):
    kind = IterableFetcher if isinstance(dataset, IterableDataset) else MapFetcher
    return kind(dataset, auto_collation, collate_fn, drop_last)
