"""benchmarks.probe_cost on the host's blkio-v1: a row per node size, every VNode counted, nothing left behind."""

import os

from benchmarks import probe_cost
from tests.conftest import needs_kernel
from vnode_sync.kernel.backend import HostCgroups


@needs_kernel
def test_the_probe_cost_benchmark_counts_every_vnode_and_removes_its_cgroups(monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["probe_cost", "--vnodes", "3", "12", "--looks", "2"])
    assert probe_cost.main() == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.strip().startswith(("3 ", "12 "))]
    assert [(row[0], row[1]) for row in rows] == [("3", "4"), ("12", "13")]    # with the default VNode
    assert not [d for d in os.listdir(HostCgroups().blkio_v1) if ".probe." in d]
