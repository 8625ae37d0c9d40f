"""The percentile the benchmarks print: nearest rank, so every figure is a value that was measured."""


def percentile(values: list[float], q: float) -> float:
    """The Q-th percentile (0-100) of VALUES."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]
