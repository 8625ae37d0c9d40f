"""The threads calls run on, off the event loop.

Every call that reads or writes the durable store runs on the one store thread, in arrival
order. An answer's encoding needs no store: it runs on the encoding threads, so a large Status
(0.8 s at 10,000 users x 100 nodes) does not hold the store thread and the calls behind it.
"""

import asyncio
import concurrent.futures
from collections.abc import Callable

ENCODING_THREADS = 2


class _Threads:
    def __init__(self, workers: int, name: str):
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)

    async def run(self, fn: Callable, *args):
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def close(self) -> None:
        self._pool.shutdown(wait=True)


class StoreThread(_Threads):
    def __init__(self):
        super().__init__(1, "store")


class EncodingThreads(_Threads):
    def __init__(self):
        super().__init__(ENCODING_THREADS, "encoding")
