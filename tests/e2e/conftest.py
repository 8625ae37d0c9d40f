"""The end-to-end tests measure how the product shares a node, not the host's other load: each test
module and everything it starts (daemons, agents, clients) take the CPU first, as the benchmarks do
(testbed/cpu_priority.py). Measured: on a host whose two cores were busy with other work, clients
starved of CPU read 16-35 MB/s against caps of 20-40 and failed the split's 10 %."""

import pytest

from testbed.cpu_priority import cpu_priority
from testbed.names import unique_name


@pytest.fixture(scope="module", autouse=True)
def cpu_first():
    with cpu_priority(unique_name("e2e-cpu")):
        yield
