"""The weight step's passes over users x resources, spread over cores by blocks of resources.

Each resource (a column) is water-filled alone, so a block of columns is a whole piece of work; only
per-user sums cross blocks, and they add up. numpy lets go of the GIL inside its loops, so threads
run the blocks at once: the calling thread does the first block and a shared pool the others. A
pass too small to pay for handing it to a thread runs as one block.
"""

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np

# Below this many user x resource pairs per block a pass (~0.4 ms per 10^6 pairs here) would not
# pay for a thread's hand-off.
PAIRS_PER_BLOCK = 1_000_000

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def cores() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0))


class ColumnShards:
    """Contiguous blocks of a users x resources array's columns, one per thread that works them."""

    def __init__(self, shape: tuple[int, int], workers: int | None = None, pairs_per_block: int = PAIRS_PER_BLOCK):
        """Blocks for a (users, resources) array: one per worker (None: per core), each of at least
        `pairs_per_block` pairs where there are enough."""
        users, resources = shape
        blocks = min(workers or cores(), max(1, users * resources // pairs_per_block), max(resources, 1))
        self.columns = resources
        bounds = np.linspace(0, resources, blocks + 1).round().astype(int)
        self.blocks = [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]

    def __len__(self) -> int:
        return len(self.blocks)

    def map(self, work: Callable[[slice], object]) -> list:
        """`work(columns)` on every block at once; the results in block order."""
        if len(self.blocks) == 1:
            return [work(self.blocks[0])]
        pool = _shared_pool()
        others = [pool.submit(work, block) for block in self.blocks[1:]]
        try:
            first = work(self.blocks[0])
        finally:
            wait(others)    # no block is left running on return, even on an error
        return [first, *(future.result() for future in others)]

    def row_sums(self, work: Callable[[slice], np.ndarray]) -> np.ndarray:
        """`work(columns)` on every block, returning per-user sums over its columns: their total."""
        parts = self.map(work)
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        return total


def _forget_pool() -> None:
    """In a forked child: the parent's pool threads are not there."""
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_forget_pool)


def _shared_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=max(1, cores() - 1), thread_name_prefix="weight-step")
        return _pool
