"""Datasets, samplers and `random_split` against hand-built expectations."""

from __future__ import annotations

import numpy as np
import pytest

import flow
from flow.utils.data import (
    BatchSampler,
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    random_split,
)


class Squares(Dataset):
    def __init__(self, n: int):
        self.n = n

    def __getitem__(self, i: int) -> int:
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i * i

    def __len__(self) -> int:
        return self.n


class Count(IterableDataset):
    def __init__(self, n: int):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self) -> int:
        return self.n


def test_dataset_base_class_needs_getitem():
    with pytest.raises(NotImplementedError, match="__getitem__"):
        Dataset()[0]
    with pytest.raises(NotImplementedError, match="__iter__"):
        iter(IterableDataset())


def test_tensor_dataset_rows():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    y = np.array([3, 1, 4, 1])
    ds = TensorDataset(flow.from_numpy(x), flow.from_numpy(y))
    assert len(ds) == 4
    for i in range(4):
        xi, yi = ds[i]
        assert isinstance(xi, flow.Tensor) and xi.dtype == flow.float32
        np.testing.assert_array_equal(xi.numpy(), x[i])
        assert yi.shape == () and yi.item() == y[i]
    np.testing.assert_array_equal(ds[-1][0].numpy(), x[-1])


def test_tensor_dataset_size_mismatch_names_sizes():
    with pytest.raises(ValueError, match=r"same size in dim 0, got sizes \[4, 5\]"):
        TensorDataset(flow.from_numpy(np.zeros((4, 2))), flow.from_numpy(np.zeros(5)))
    with pytest.raises(ValueError, match="at least one tensor"):
        TensorDataset()
    with pytest.raises(ValueError, match="at least one dim"):
        TensorDataset(flow.from_numpy(np.array(1.0)))


def test_concat_dataset_and_add():
    ds = Squares(3) + Squares(2)
    assert isinstance(ds, ConcatDataset)
    assert len(ds) == 5
    assert [ds[i] for i in range(5)] == [0, 1, 4, 0, 1]
    assert ds[-1] == 1 and ds[-5] == 0
    assert ds.cumulative_sizes == [3, 5]
    with pytest.raises(IndexError, match="index 5 is out of range for length 5"):
        ds[5]
    with pytest.raises(IndexError):
        ds[-6]
    with pytest.raises(ValueError, match="non-empty"):
        ConcatDataset([])
    with pytest.raises(TypeError, match="ChainDataset"):
        ConcatDataset([Squares(1), Count(1)])


def test_chain_dataset():
    ds = Count(2) + Count(3)
    assert isinstance(ds, ChainDataset)
    assert list(ds) == [0, 1, 0, 1, 2] and len(ds) == 5


def test_subset():
    sub = Subset(Squares(10), [7, 2, 5])
    assert len(sub) == 3 and [sub[i] for i in range(3)] == [49, 4, 25]


def _indices(subset: Subset) -> list[int]:
    return list(subset.indices)


@pytest.mark.parametrize(
    "n, lengths, sizes",
    [(10, [3, 7], [3, 7]), (10, [0.3, 0.3, 0.4], [3, 3, 4]), (11, [0.5, 0.5], [6, 5]),
     (7, [0.2, 0.2, 0.6], [2, 1, 4]), (5, [np.int64(2), 3], [2, 3])],
)  # fmt: skip
def test_random_split_sizes_and_disjointness(n, lengths, sizes):
    parts = random_split(Squares(n), lengths, generator=0)
    assert [len(p) for p in parts] == sizes
    union = sorted(i for p in parts for i in _indices(p))
    assert union == list(range(n))


def test_random_split_fraction_remainder_follows_pytorch():
    # floor(7 * [0.2, 0.2, 0.6]) = [1, 1, 4]; the one left over goes to the first split
    assert [len(p) for p in random_split(Squares(7), [0.2, 0.2, 0.6], generator=0)] == [2, 1, 4]


@pytest.mark.parametrize(
    "make", [lambda: 5, lambda: np.random.default_rng(5), lambda: flow.Generator().manual_seed(5)]
)
def test_random_split_reproducible(make):
    a = [_indices(p) for p in random_split(Squares(20), [0.5, 0.5], generator=make())]
    b = [_indices(p) for p in random_split(Squares(20), [0.5, 0.5], generator=make())]
    assert a == b
    assert a[0] != list(range(10))  # shuffled


def test_random_split_default_generator_follows_manual_seed():
    flow.manual_seed(11)
    a = [_indices(p) for p in random_split(Squares(20), [10, 10])]
    flow.manual_seed(11)
    b = [_indices(p) for p in random_split(Squares(20), [10, 10])]
    assert a == b


def test_random_split_bad_lengths():
    with pytest.raises(ValueError, match=r"sum to 9, but the dataset has length 10"):
        random_split(Squares(10), [4, 5])
    with pytest.raises(ValueError, match="fractions"):
        random_split(Squares(10), [0.5, 0.6])
    with pytest.raises(TypeError, match="generator"):
        random_split(Squares(10), [5, 5], generator="seed")


def test_sequential_sampler():
    s = SequentialSampler(Squares(4))
    assert list(s) == [0, 1, 2, 3] and len(s) == 4


def test_random_sampler_permutes_and_reshuffles():
    s = RandomSampler(Squares(30), generator=np.random.default_rng(0))
    first, second = list(s), list(s)
    assert sorted(first) == sorted(second) == list(range(30))
    assert first != second
    again = RandomSampler(Squares(30), generator=np.random.default_rng(0))
    assert [list(again), list(again)] == [first, second]


def test_random_sampler_replacement_and_num_samples():
    s = RandomSampler(Squares(3), replacement=True, num_samples=50, generator=1)
    out = list(s)
    assert len(out) == len(s) == 50 and set(out) <= {0, 1, 2}
    s = RandomSampler(Squares(4), num_samples=10, generator=1)
    out = list(s)
    assert len(out) == 10 and sorted(out[:4]) == sorted(out[4:8]) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        RandomSampler(Squares(4), num_samples=0)
    with pytest.raises(ValueError, match="replacement should be a boolean"):
        RandomSampler(Squares(4), replacement=1)


def test_subset_random_sampler():
    s = SubsetRandomSampler([10, 20, 30, 40], generator=3)
    out = list(s)
    assert sorted(out) == [10, 20, 30, 40] and len(s) == 4


def test_weighted_random_sampler_skips_zero_weights():
    out = list(WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 40, generator=0))
    assert len(out) == 40 and set(out) == {1, 3}
    out = list(WeightedRandomSampler([1.0, 1.0, 0.0], 2, replacement=False, generator=0))
    assert sorted(out) == [0, 1]
    with pytest.raises(ValueError, match="without replacement"):
        WeightedRandomSampler([1.0, 0.0], 2, replacement=False)


@pytest.mark.parametrize("drop_last, expected", [
    (False, [[0, 1, 2], [3, 4, 5], [6]]), (True, [[0, 1, 2], [3, 4, 5]])])  # fmt: skip
def test_batch_sampler(drop_last, expected):
    s = BatchSampler(SequentialSampler(Squares(7)), 3, drop_last)
    assert list(s) == expected and len(s) == len(expected)


@pytest.mark.parametrize("batch_size", [0, -2, 1.5, True])
def test_batch_sampler_rejects_bad_batch_size(batch_size):
    with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
        BatchSampler(range(4), batch_size, False)
