"""Blocks of resources that threads work at once."""

import threading

import numpy as np
import pytest

from vnode_sync.coordinator.policy.column_shards import ColumnShards


def test_blocks_cover_every_column_once_in_order_and_small_arrays_stay_one_block():
    shards = ColumnShards((1000, 10_001), workers=3)
    assert [b.start for b in shards.blocks] == [0, shards.blocks[0].stop, shards.blocks[1].stop]
    assert shards.blocks[-1].stop == 10_001
    assert max(b.stop - b.start for b in shards.blocks) - min(b.stop - b.start for b in shards.blocks) <= 1
    assert len(ColumnShards((50, 100), workers=8)) == 1           # 5,000 pairs: a hand-off costs more
    assert len(ColumnShards((3, 2), workers=8, pairs_per_block=1)) == 2   # never more blocks than columns


def test_every_block_runs_on_its_own_thread_and_the_per_user_sums_add_up():
    values = np.arange(12.0).reshape(3, 4)
    threads = set()

    def block_sums(columns):
        threads.add(threading.get_ident())
        return values[:, columns].sum(axis=1)

    shards = ColumnShards(values.shape, workers=4, pairs_per_block=1)
    assert shards.row_sums(block_sums) == pytest.approx(values.sum(axis=1))
    assert threading.get_ident() in threads and len(threads) >= 2
    assert shards.map(lambda columns: columns.start) == [0, 1, 2, 3]


def test_an_error_in_a_block_is_raised_only_after_every_block_has_finished():
    finished = []

    def work(columns):
        if columns.start == 2:
            raise ValueError("block 2 failed")
        finished.append(columns.start)

    with pytest.raises(ValueError, match="block 2 failed"):
        ColumnShards((1, 4), workers=4, pairs_per_block=1).map(work)
    assert sorted(finished) == [0, 1, 3]
