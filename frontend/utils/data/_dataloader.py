"""`DataLoader`: batches from a dataset, in the main process or in worker processes."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from numbers import Integral
from typing import Any

from flow.core import profiling
from flow.utils.rng import as_generator, draw_seed

from ._collate import default_collate, default_convert
from ._dataset import Dataset, IterableDataset
from ._fetch import make_fetcher
from ._sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler


class _InfiniteConstantSampler(Sampler):
    """The sampler of an `IterableDataset`: an endless stream of None (the stream decides)."""

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None


def _check_iterable_args(shuffle: Any, sampler: Any, batch_sampler: Any) -> None:
    for name, value, unset in (("shuffle", shuffle, (False, None)), ("sampler", sampler, (None,)),
                               ("batch_sampler", batch_sampler, (None,))):  # fmt: skip
        if all(value is not u for u in unset):
            raise ValueError(f"DataLoader with IterableDataset: expected unspecified {name} "
                             f"option, but got {name}={value!r}")  # fmt: skip


def _is_int(value: Any) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _check_worker_args(num_workers: Any, timeout: float, prefetch_factor: Any,
                       persistent_workers: bool) -> None:  # fmt: skip
    if not _is_int(num_workers) or num_workers < 0:
        raise ValueError(f"DataLoader: num_workers option should be a non-negative int; use "
                         f"num_workers=0 to disable multiprocessing, got {num_workers!r}")  # fmt: skip
    if timeout < 0:
        raise ValueError(f"DataLoader: timeout option should be non-negative, got {timeout}")
    if num_workers > 0 and (not _is_int(prefetch_factor) or prefetch_factor < 1):
        raise ValueError(f"DataLoader: prefetch_factor option should be a positive int, got "
                         f"{prefetch_factor!r}")  # fmt: skip
    if persistent_workers and num_workers == 0:
        raise ValueError("DataLoader: persistent_workers option needs num_workers > 0")


class DataLoader:
    """Iterates over `dataset` in batches, as `torch.utils.data.DataLoader` does.

    Indices come from `sampler` (or, with `shuffle=True`, a `RandomSampler` drawing
    from `generator`: None for flow's default generator, an int seed, a
    `numpy.random.Generator` or a `flow.Generator`); `batch_size` of them form a
    batch that `collate_fn` (default: `default_collate`) merges. `batch_size=None`
    turns batching off. With `num_workers > 0`, worker processes fetch batches
    and the loader yields them in sampler order; see `_multiprocess`.
    """

    _frozen = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
               "persistent_workers")  # fmt: skip

    def __init__(
        self,
        dataset: Dataset,
        batch_size: int | None = 1,
        shuffle: bool | None = False,
        sampler: Sampler | Iterable | None = None,
        batch_sampler: Sampler | Iterable | None = None,
        num_workers: int = 0,
        collate_fn: Callable[[list], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context=None,
        generator=None,
        *,
        prefetch_factor: int = 2,
        persistent_workers: bool = False,
    ):
        _check_worker_args(num_workers, timeout, prefetch_factor, persistent_workers)
        generator = as_generator(generator, "DataLoader")

        if isinstance(dataset, IterableDataset):
            _check_iterable_args(shuffle, sampler, batch_sampler)
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with "
                                 "batch_size, shuffle, sampler, and drop_last")  # fmt: skip
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("DataLoader: batch_size=None option disables auto-batching and is "
                             "mutually exclusive with drop_last")  # fmt: skip
        if sampler is None:
            if isinstance(dataset, IterableDataset):
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = int(num_workers)
        self.collate_fn = collate_fn or (default_collate if batch_sampler is not None
                                         else default_convert)  # fmt: skip
        self.pin_memory = pin_memory  # accepted for compatibility: tensors live on the host
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self._iterator = None
        self._initialized = True

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._frozen and getattr(self, "_initialized", False):
            raise ValueError(f"DataLoader: {name} attribute should not be set after the "
                             f"DataLoader is initialized")  # fmt: skip
        super().__setattr__(name, value)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self) -> Iterable:
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self) -> Iterator:
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        from ._multiprocess import MultiProcessIter

        if not self.persistent_workers:
            return MultiProcessIter(self)
        if self._iterator is None:
            self._iterator = MultiProcessIter(self)
        else:
            self._iterator.reset(self)
        return self._iterator

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)  # TypeError when the stream has no length, as in PyTorch
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self._index_sampler)


class BaseIter:
    """State shared by both iterators: the sampler's iterator and the workers' base seed."""

    def __init__(self, loader: DataLoader):
        self._loader = loader
        self._dataset = loader.dataset
        self._auto_collation = loader._auto_collation
        self._collate_fn = loader.collate_fn
        self._drop_last = loader.drop_last
        # Drawn whether or not there are workers, so the shuffle order does not depend on it.
        self._base_seed = draw_seed(loader.generator)
        self._sampler_iter = iter(loader._index_sampler)

    def reset(self, loader: DataLoader) -> None:
        """A new epoch on persistent workers. A seed is drawn and dropped, as a new iterator
        would draw one, so the shuffle order matches non-persistent loaders epoch by epoch."""
        draw_seed(loader.generator)
        self._sampler_iter = iter(loader._index_sampler)

    def __iter__(self) -> BaseIter:
        return self

    def __len__(self) -> int:
        return len(self._loader)

    def __next__(self) -> Any:
        rec = profiling.ACTIVE
        if rec is None:
            return self._next()
        import time

        t0 = time.perf_counter_ns()
        batch = self._next()  # StopIteration ends the epoch unrecorded
        rec.add("DataLoader.__next__", "data", t0, time.perf_counter_ns(),
                {"dataset": type(self._dataset).__name__,
                 "workers": self._loader.num_workers})  # fmt: skip
        return batch

    def _next(self) -> Any:
        raise NotImplementedError


class _SingleProcessIter(BaseIter):
    def __init__(self, loader: DataLoader):
        super().__init__(loader)
        self._fetcher = make_fetcher(self._dataset, self._auto_collation, self._collate_fn,
                                     self._drop_last)  # fmt: skip

    def _next(self) -> Any:
        return self._fetcher.fetch(next(self._sampler_iter))
