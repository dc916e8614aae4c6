"""flow.utils.data.distributed.DistributedSampler: each rank's share of a data set."""

from __future__ import annotations

import pytest

import flow
from flow.utils.data import DataLoader, TensorDataset
from flow.utils.data.distributed import DistributedSampler


def shares(n, world, **kw):
    return [list(DistributedSampler(range(n), num_replicas=world, rank=r, **kw))
            for r in range(world)]  # fmt: skip


@pytest.mark.parametrize("n,world", [(12, 3), (10, 4), (3, 4), (1, 2)])
def test_ranks_cover_the_data_set_and_step_together(n, world):
    parts = shares(n, world, shuffle=True, seed=5)
    size = -(-n // world)
    assert all(len(p) == size for p in parts)
    flat = sorted(i for p in parts for i in p)
    assert set(flat) == set(range(n))  # every index is used
    if n % world == 0:
        assert flat == list(range(n))  # ... exactly once
    s = DistributedSampler(range(n), num_replicas=world, rank=0)
    assert len(s) == size and s.total_size == size * world


def test_without_shuffle_strided_and_padded_from_the_start():
    # 10 indices over 4 ranks: padded with 0 and 1 to 12, rank r takes r, r+4, r+8
    assert shares(10, 4, shuffle=False) == [[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]]
    assert shares(10, 4, shuffle=False, drop_last=True) == [[0, 4], [1, 5], [2, 6], [3, 7]]


def test_torch_agrees_without_shuffle():
    torch = pytest.importorskip("torch", reason="torch cross-check (optional)")
    from torch.utils.data.distributed import DistributedSampler as Torch

    for n, world, drop in [(10, 4, False), (10, 4, True), (7, 3, False), (3, 4, False)]:
        for r in range(world):
            ours = DistributedSampler(range(n), world, r, shuffle=False, drop_last=drop)
            theirs = Torch(range(n), world, r, shuffle=False, drop_last=drop)
            assert list(ours) == list(theirs) and len(ours) == len(theirs)
    del torch


def test_set_epoch_reshuffles_the_same_way_on_every_rank():
    a = DistributedSampler(range(20), num_replicas=2, rank=0, seed=1)
    b = DistributedSampler(range(20), num_replicas=2, rank=1, seed=1)
    first = list(a)
    a.set_epoch(1)
    b.set_epoch(1)
    second_a, second_b = list(a), list(b)
    assert second_a != first
    assert sorted(second_a + second_b) == list(range(20))  # one permutation, split
    a.set_epoch(0)
    assert list(a) == first  # the epoch alone decides the order


def test_single_process_defaults_and_dataloader():
    s = DistributedSampler(range(5), shuffle=False)
    assert (s.num_replicas, s.rank) == (flow.env.get_world_size(), flow.env.get_rank())
    data = TensorDataset(flow.arange(8).reshape(8, 1))
    loader = DataLoader(data, batch_size=4,
                        sampler=DistributedSampler(data, num_replicas=2, rank=1, shuffle=False))
    assert [b[0].numpy().ravel().tolist() for b in loader] == [[1, 3, 5, 7]]
    assert flow.utils.data.DistributedSampler is DistributedSampler


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"invalid rank 2, rank should be in the interval \[0,"):
        DistributedSampler(range(4), num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="num_replicas should be positive"):
        DistributedSampler(range(4), num_replicas=0, rank=0)
