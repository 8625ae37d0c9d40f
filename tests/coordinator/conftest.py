"""One real three-server ZooKeeper ensemble for the coordinator's tests that need one (test_ha,
test_zookeeper_store): each works under a root or names of its own, and a test that stops a server
starts it again, so they share it instead of starting one each (a few seconds of three JVMs)."""

import pytest

from testbed.names import unique_name
from testbed.zookeeper_ensemble import ZooKeeperEnsemble


@pytest.fixture(scope="package")
def ensemble():
    with ZooKeeperEnsemble(unique_name("zk")) as started:
        yield started
