"""CpuSpan: the CPU processes took over a span, by role, as a share of one core; a role whose
processes all ended before the span did is not measured (None), not counted as idle."""

import subprocess
import sys
import time

from testbed.process_cpu import CpuSpan

SPIN = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass"


def test_a_spinning_process_counts_far_more_than_a_sleeping_one_and_an_ended_one_is_not_measured():
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    sleeper = subprocess.Popen(["sleep", "30"])
    short = subprocess.Popen(["sleep", "0.1"])
    try:
        with CpuSpan({"spinning": [spinner.pid], "sleeping": [sleeper.pid], "ended": [short.pid]}) as span:
            short.wait()
            time.sleep(1.0)
    finally:
        for process in (spinner, sleeper):
            process.kill()
            process.wait()
    assert span.shares["spinning"] > 0.2
    assert span.shares["sleeping"] < 0.05
    assert span.shares["ended"] is None
    assert span.describe().startswith("spinning ") and "ended -" in span.describe()
