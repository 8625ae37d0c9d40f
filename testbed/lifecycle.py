"""A testbed service used as a context manager: started on entry, stopped on exit, and stopped
too when its start fails half-way, so a failed start leaves no daemon or directory behind."""

from typing import Self


class StartedService:
    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
