"""A clock a test sets by hand: pass it where the code takes a `clock` callable, move `now` to let time pass."""


class Clock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now
