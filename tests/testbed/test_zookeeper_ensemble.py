"""The testbed's ZooKeeper ensemble: three real servers on loopback that elect a leader, keep
serving through the restart of one server, and leave nothing behind, even when their owner dies."""

import os
import subprocess
import sys
import uuid

import psutil
import pytest
from kazoo.client import KazooClient

from testbed import leftovers
from testbed.names import TEST_PREFIX, unique_name
from testbed.zookeeper_ensemble import WHY_NO_ZOOKEEPER, ZooKeeperEnsemble

pytestmark = pytest.mark.skipif(WHY_NO_ZOOKEEPER is not None, reason=WHY_NO_ZOOKEEPER or "")


def test_three_servers_elect_a_leader_and_serve_through_a_restart_of_one():
    with ZooKeeperEnsemble(unique_name("zk")) as ensemble:
        modes = sorted(s.mode() for s in ensemble.servers)
        assert modes == ["follower", "follower", "leader"]
        client = KazooClient(hosts=ensemble.hosts)
        client.start(timeout=20)
        try:
            path = f"/vnode-sync-test/{uuid.uuid4().hex}"
            client.create(path, b"1", makepath=True)
            index = ensemble.servers.index(ensemble.leader())
            ensemble.stop_server(index)
            # The two left elect a new leader and the client moves over; an op under way as its server
            # went is lost (ConnectionLoss, ZooKeeper's recoverable error) and is retried, as every
            # ZooKeeper client must.
            client.retry(client.set, path, b"2")
            ensemble.start_server(index)
            assert sorted(s.mode() for s in ensemble.servers) == ["follower", "follower", "leader"]
            assert client.get(path)[0] == b"2"
        finally:
            client.stop()
            client.close()
        workdir, processes = ensemble.workdir, [s.process for s in ensemble.servers]
    assert not os.path.exists(workdir)
    assert all(p.poll() is not None for p in processes)


def test_a_dead_owners_ensemble_is_found_and_removed_as_a_leftover():
    name = f"{TEST_PREFIX}.zkleft.{{pid}}.{uuid.uuid4().hex[:8]}"   # named with its owner's pid
    owner = subprocess.Popen(
        [sys.executable, "-c", "import os, signal, sys\n"
         "from testbed.zookeeper_ensemble import ZooKeeperEnsemble\n"
         "zk = ZooKeeperEnsemble(sys.argv[1].format(pid=os.getpid())).start()\n"
         "print(zk.workdir, flush=True)\n"
         "os.kill(os.getpid(), signal.SIGKILL)\n", name],
        stdout=subprocess.PIPE, text=True)
    workdir = owner.stdout.readline().strip()
    owner.wait()
    run = os.path.basename(workdir).split(".zookeeper.")[0]
    try:
        found = leftovers.find(run)
        kinds = sorted(item.kind for item in found)
        assert kinds == ["process"] * 3 + ["work dir"] and not any(item.live for item in found)
        pids = [int(item.what) for item in found if item.kind == "process"]
        assert all("QuorumPeerMain" in " ".join(psutil.Process(p).cmdline()) for p in pids)
    finally:
        leftovers.remove_crashed(run)
    assert leftovers.find(run) == [] and not os.path.exists(workdir)
