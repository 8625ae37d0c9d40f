"""benchmarks.zookeeper_read_cost on a real ensemble: each read is timed and set against the bare get."""

import pytest

from benchmarks import zookeeper_read_cost
from testbed.zookeeper_ensemble import WHY_NO_ZOOKEEPER

pytestmark = pytest.mark.skipif(WHY_NO_ZOOKEEPER is not None, reason=WHY_NO_ZOOKEEPER or "")


def test_the_read_cost_benchmark_prints_each_read_against_the_bare_get(capsys):
    assert zookeeper_read_cost.main(["--users", "3", "--calls", "20"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if " | " in line][1:]
    assert [row.split(" | ")[0].strip() for row in rows] == [
        "get (the read before the sync)", "store.user(name)", "store.users() (3 users)"]
    assert rows[0].split(" | ")[3].strip() == "1.00"
    assert all(float(row.split(" | ")[1]) > 0 for row in rows)
