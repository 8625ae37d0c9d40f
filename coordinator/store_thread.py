"""The one thread for every call that reads or writes the durable store: calls run in arrival order."""

import asyncio
import concurrent.futures
from collections.abc import Callable


class StoreThread:
    def __init__(self):
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="store")

    async def run(self, fn: Callable, *args):
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
