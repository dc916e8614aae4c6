"""`DataLoader` and `default_collate`: batches against numpy, shuffling, and worker processes.

Worker tests run under an alarm, so a hang fails the test instead of the run.
"""

from __future__ import annotations

import gc
import os
import signal
import time
from collections import namedtuple

import numpy as np
import pytest

import flow
from flow.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    IterableDataset,
    SequentialSampler,
    TensorDataset,
    default_collate,
    default_convert,
    get_worker_info,
)

Pair = namedtuple("Pair", ["image", "label"])


@pytest.fixture(autouse=True)
def no_hang():
    def fail(signum, frame):
        raise TimeoutError("test took over 30 s: the DataLoader hung")

    previous = signal.signal(signal.SIGALRM, fail)
    signal.alarm(30)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


class Records(Dataset):
    """Sample i: a dict with an image array, an int label, a float and a name."""

    def __init__(self, n: int = 10):
        self.n = n

    def __getitem__(self, i: int) -> dict:
        image = np.full((2, 3), i, dtype=np.float32)
        return {"image": image, "label": i % 3, "weight": i / 2, "name": f"s{i}"}

    def __len__(self) -> int:
        return self.n


class Failing(Dataset):
    def __init__(self, bad: int, n: int = 8):
        self.bad, self.n = bad, n

    def __getitem__(self, i: int) -> np.ndarray:
        if i == self.bad:
            raise ValueError(f"sample {i} is corrupt")
        return np.array([i])

    def __len__(self) -> int:
        return self.n


class TwoArgError(Exception):
    def __init__(self, a, b):
        super().__init__(a, b)


class RaisesTwoArgError(Failing):
    def __getitem__(self, i):
        raise TwoArgError("x", "y")


class Sleepy(Dataset):
    def __getitem__(self, i):
        time.sleep(60)

    def __len__(self) -> int:
        return 4


class Dies(Dataset):
    def __getitem__(self, i):
        os._exit(3)

    def __len__(self) -> int:
        return 4


class WhoAmI(Dataset):
    """Sample i: (i, worker id, worker seed, a draw from numpy's global RNG)."""

    def __getitem__(self, i):
        info = get_worker_info()
        wid, seed = (-1, -1) if info is None else (info.id, info.seed)
        return np.array([i, wid, seed % 1000]), np.random.random()

    def __len__(self) -> int:
        return 12


class Sharded(IterableDataset):
    """range(n), split into contiguous shards among workers."""

    def __init__(self, n: int):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return iter(range(self.n))
        per = -(-self.n // info.num_workers)
        return iter(range(info.id * per, min(self.n, (info.id + 1) * per)))

    def __len__(self) -> int:
        return self.n


def _arrays(batches) -> list:
    """Batches as nested lists of numpy arrays / plain values, for comparison."""

    def conv(x):
        if isinstance(x, flow.Tensor):
            return x.numpy().tolist()
        if isinstance(x, dict):
            return {k: conv(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [conv(v) for v in x]
        return x

    return [conv(b) for b in batches]


# --------------------------------------------------------------------------- batching and collate


def _xy(n: int = 10):
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    y = np.arange(n, dtype=np.int64) * 10
    return x, y, TensorDataset(flow.from_numpy(x), flow.from_numpy(y))


@pytest.mark.parametrize("drop_last", [False, True])
def test_batches_match_numpy(drop_last):
    x, y, ds = _xy(10)
    loader = DataLoader(ds, batch_size=4, drop_last=drop_last)
    batches = list(loader)
    starts = [0, 4] if drop_last else [0, 4, 8]
    assert len(loader) == len(batches) == len(starts)
    for (bx, by), s in zip(batches, starts):
        assert bx.dtype == flow.float32 and by.dtype == flow.int64
        np.testing.assert_array_equal(bx.numpy(), x[s : s + 4])
        np.testing.assert_array_equal(by.numpy(), y[s : s + 4])


def test_collate_nested_dicts():
    batch = next(iter(DataLoader(Records(), batch_size=3)))
    assert set(batch) == {"image", "label", "weight", "name"}
    np.testing.assert_array_equal(batch["image"].numpy(), np.stack([np.full((2, 3), i, np.float32)
                                                                    for i in range(3)]))  # fmt: skip
    assert batch["image"].dtype == flow.float32
    assert batch["label"].dtype == flow.int64 and batch["label"].tolist() == [0, 1, 2]
    assert batch["weight"].dtype == flow.float64 and batch["weight"].tolist() == [0.0, 0.5, 1.0]
    assert batch["name"] == ["s0", "s1", "s2"]


def test_default_collate_rules():
    out = default_collate([(1, 2.5, True, Pair(np.ones(2, np.uint8), np.float32(1.5)))] * 2)
    assert isinstance(out, list) and len(out) == 4  # tuples become lists, as in PyTorch
    ints, floats, bools, pair = out
    assert ints.dtype == flow.int64 and floats.dtype == flow.float64 and bools.dtype == flow.bool
    assert isinstance(pair, Pair)
    assert pair.image.dtype == flow.int32 and pair.image.tolist() == [[1, 1], [1, 1]]
    assert pair.label.dtype == flow.float32 and pair.label.tolist() == [1.5, 1.5]
    lists = default_collate([[np.zeros(1), 1], [np.ones(1), 2]])
    assert isinstance(lists, list) and lists[1].tolist() == [1, 2]
    stacked = default_collate([flow.from_numpy(np.eye(2)), flow.from_numpy(np.zeros((2, 2)))])
    np.testing.assert_array_equal(stacked.numpy(), np.stack([np.eye(2), np.zeros((2, 2))]))


def test_default_collate_errors():
    with pytest.raises(
        RuntimeError, match=r"equal size, but got \[2\] at entry 0 and \[3\] at entry 1"
    ):
        default_collate([np.zeros(2), np.zeros(3)])
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        default_collate([[1, 2], [1]])
    with pytest.raises(TypeError, match="found <class 'object'>"):
        default_collate([object(), object()])
    with pytest.raises(TypeError, match="found <U1"):
        default_collate([np.array(["a"]), np.array(["b"])])


def test_batch_size_none_converts_each_sample():
    loader = DataLoader(Records(3), batch_size=None)
    samples = list(loader)
    assert len(loader) == 3 and len(samples) == 3
    assert isinstance(samples[1]["image"], flow.Tensor) and samples[1]["label"] == 1
    assert default_convert((np.float64(2.0), [np.zeros(2)]))[0].dtype == flow.float64


def test_custom_sampler_batch_sampler_and_collate_fn():
    x, y, ds = _xy(6)
    loader = DataLoader(ds, batch_size=2, sampler=[5, 0, 3, 1])
    assert [b[1].tolist() for b in loader] == [[50, 0], [30, 10]]
    loader = DataLoader(ds, batch_sampler=[[1], [2, 4, 5]])
    assert [b[1].tolist() for b in loader] == [[10], [20, 40, 50]]
    loader = DataLoader(ds, batch_size=3, collate_fn=lambda samples: len(samples))
    assert list(loader) == [3, 3]


def test_iterable_dataset_batches_and_len():
    loader = DataLoader(Sharded(7), batch_size=3)
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5], [6]]
    assert len(loader) == 3
    loader = DataLoader(Sharded(7), batch_size=3, drop_last=True)
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5]] and len(loader) == 2


# --------------------------------------------------------------------------- shuffling


def _order(loader) -> list[int]:
    return [v for _, y in loader for v in y.tolist()]


@pytest.mark.parametrize("make", [lambda: 7, lambda: np.random.default_rng(7),
                                  lambda: flow.Generator().manual_seed(7)])  # fmt: skip
def test_shuffle_reproducible_and_reshuffles_each_epoch(make):
    _, y, ds = _xy(20)
    a = DataLoader(ds, batch_size=4, shuffle=True, generator=make())
    b = DataLoader(ds, batch_size=4, shuffle=True, generator=make())
    a1, a2 = _order(a), _order(a)
    assert sorted(a1) == sorted(y.tolist())
    assert a1 != a2
    assert a1 != y.tolist()
    assert [_order(b), _order(b)] == [a1, a2]


def test_shuffle_follows_flow_manual_seed():
    _, _, ds = _xy(20)
    flow.manual_seed(3)
    a = _order(DataLoader(ds, batch_size=4, shuffle=True))
    flow.manual_seed(3)
    b = _order(DataLoader(ds, batch_size=4, shuffle=True))
    assert a == b


# --------------------------------------------------------------------------- worker processes


@pytest.mark.parametrize("num_workers", [1, 3])
@pytest.mark.parametrize("drop_last", [False, True])
def test_workers_match_single_process(num_workers, drop_last):
    kwargs = dict(batch_size=3, shuffle=True, drop_last=drop_last)
    single = DataLoader(Records(11), generator=5, **kwargs)
    multi = DataLoader(Records(11), generator=5, num_workers=num_workers, **kwargs)
    for _ in range(2):  # two epochs: the reshuffled order must agree too
        expected = _arrays(single)
        assert _arrays(multi) == expected
    assert len(multi) == len(expected)


def test_workers_without_batching():
    single = list(DataLoader(Records(5), batch_size=None))
    multi = list(DataLoader(Records(5), batch_size=None, num_workers=2))
    assert _arrays(multi) == _arrays(single)


def test_iterable_dataset_sharded_by_workers_comes_round_robin():
    loader = DataLoader(Sharded(10), batch_size=2, num_workers=2)
    # worker 0 streams 0..4 and worker 1 streams 5..9; batches alternate between them
    assert [b.tolist() for b in loader] == [[0, 1], [5, 6], [2, 3], [7, 8], [4], [9]]


def test_worker_info_and_seeds():
    assert get_worker_info() is None
    gen = np.random.default_rng(1)
    batches = list(DataLoader(WhoAmI(), batch_size=2, num_workers=2, generator=gen))
    ids = [int(i) for b, _ in batches for i in b[:, 1].tolist()]
    assert ids == [0, 0, 1, 1] * 3  # round-robin tasks
    seeds = {int(w): int(s) for b, _ in batches for _, w, s in b.tolist()}
    assert (seeds[1] - seeds[0]) % 1000 == 1  # base_seed + worker_id
    again = list(DataLoader(WhoAmI(), batch_size=2, num_workers=2,
                            generator=np.random.default_rng(1)))  # fmt: skip
    assert _arrays(again) == _arrays(batches)  # numpy's global RNG is seeded per worker
    draws = [v for _, r in batches for v in r.tolist()]
    assert len(set(draws)) == len(draws)


def test_persistent_workers_keep_order_across_epochs():
    single = DataLoader(Records(9), batch_size=2, shuffle=True, generator=4)
    multi = DataLoader(Records(9), batch_size=2, shuffle=True, generator=4, num_workers=2,
                       persistent_workers=True)  # fmt: skip
    first = iter(multi)
    workers = list(first._workers)
    assert _arrays([next(first)]) == _arrays(single)[:1]  # abandon epoch 1 early
    assert _arrays(multi) == _arrays(single)
    assert iter(multi) is first and first._workers == workers
    loader = DataLoader(Sharded(6), batch_size=2, num_workers=2, persistent_workers=True)
    assert [b.tolist() for b in loader] == [b.tolist() for b in loader] == [[0, 1], [3, 4], [2],
                                                                            [5]]  # fmt: skip


def test_workers_shut_down_when_exhausted_or_collected():
    it = iter(DataLoader(Records(4), batch_size=2, num_workers=2))
    workers = list(it._workers)
    assert len(list(it)) == 2
    assert not any(w.is_alive() for w in workers)
    it = iter(DataLoader(Records(4), batch_size=2, num_workers=2))
    next(it)
    workers = list(it._workers)
    del it
    gc.collect()
    assert not any(w.is_alive() for w in workers)


def test_worker_exception_reraised_with_traceback():
    loader = DataLoader(Failing(bad=5), batch_size=2, num_workers=2)
    it = iter(loader)
    assert next(it).tolist() == [[0], [1]]
    assert next(it).tolist() == [[2], [3]]
    with pytest.raises(ValueError) as info:
        next(it)
    text = str(info.value)
    assert "Caught ValueError in DataLoader worker process 0" in text
    assert "sample 5 is corrupt" in text and "Traceback" in text and "__getitem__" in text
    assert next(it).tolist() == [[6], [7]]  # later batches still arrive, as in PyTorch


def test_worker_exception_that_cannot_be_rebuilt_becomes_runtime_error():
    with pytest.raises(RuntimeError, match="Caught TwoArgError in DataLoader worker process"):
        list(DataLoader(RaisesTwoArgError(bad=0), num_workers=1))


def test_worker_init_fn_error_surfaces():
    def init(worker_id):
        raise KeyError(f"no config for worker {worker_id}")

    with pytest.raises(KeyError, match="no config for worker 0"):
        list(DataLoader(Records(2), num_workers=1, worker_init_fn=init))


def test_timeout_raises():
    with pytest.raises(RuntimeError, match=r"DataLoader timed out after 0.2 seconds"):
        next(iter(DataLoader(Sleepy(), num_workers=1, timeout=0.2)))


def test_dead_worker_raises():
    with pytest.raises(RuntimeError, match="exited unexpectedly .*exit code 3"):
        list(DataLoader(Dies(), num_workers=1))


def test_spawn_start_method():
    _, y, ds = _xy(6)
    loader = DataLoader(ds, batch_size=4, num_workers=1, multiprocessing_context="spawn")
    assert [b[1].tolist() for b in loader] == [y[:4].tolist(), y[4:].tolist()]
    loader = DataLoader(ds, num_workers=1, collate_fn=lambda b: b,
                        multiprocessing_context="spawn")  # fmt: skip
    with pytest.raises(RuntimeError, match="'spawn' start method, which pickles the dataset"):
        iter(loader)


# --------------------------------------------------------------------------- bad arguments


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(batch_size=0), "batch_size should be a positive integer value, but got batch_size=0"),
        (dict(batch_size=-1), "batch_size=-1"),
        (dict(shuffle=True, sampler=[0, 1]), "sampler option is mutually exclusive with shuffle"),
        (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler option is mutually exclusive"),
        (dict(batch_sampler=[[0]], drop_last=True), "batch_sampler option is mutually exclusive"),
        (dict(batch_size=None, drop_last=True), "batch_size=None option disables auto-batching"),
        (dict(num_workers=-1), "num_workers option should be a non-negative int"),
        (dict(timeout=-1), "timeout option should be non-negative"),
        (dict(persistent_workers=True), "persistent_workers option needs num_workers > 0"),
        (dict(num_workers=1, prefetch_factor=0), "prefetch_factor option should be a positive"),
        (dict(drop_last=1), "drop_last should be a boolean value"),
    ],
)  # fmt: skip
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        DataLoader(Records(4), **kwargs)


def test_bad_arguments_for_iterable_dataset_and_generator():
    with pytest.raises(ValueError, match="IterableDataset: expected unspecified shuffle option"):
        DataLoader(Sharded(4), shuffle=True)
    with pytest.raises(ValueError, match="expected unspecified sampler option"):
        DataLoader(Sharded(4), sampler=[0])
    with pytest.raises(TypeError, match="expected generator to be None, an int seed"):
        DataLoader(Records(4), shuffle=True, generator=1.5)


def test_attributes_frozen_after_init():
    loader = DataLoader(Records(4), batch_size=2)
    with pytest.raises(ValueError, match="batch_size attribute should not be set"):
        loader.batch_size = 3
    assert isinstance(loader.batch_sampler, BatchSampler)
    assert isinstance(loader.sampler, SequentialSampler)
