"""Compute side: users' connections to storage ports, on a fake table and on the real kernel."""

import os

import pytest

from testbed.fake_datanode import connect_as, create_listener
from tests.handlers.fakeproc import FakeProc
from vnode_sync.agents.compute.connections import OwnedConnection, storage_connections
from vnode_sync.agents.handlers.sockets import TCP_ESTABLISHED, TCP_LISTEN, TcpSocket

USERS = {64001: "alice", 64002: "bob"}


def test_only_known_users_connections_to_storage_ports_are_reported_with_their_storage_end(tmp_path):
    proc = FakeProc(str(tmp_path))
    proc.process("self", ["vnode-agent"])
    proc.add_socket("self", TcpSocket(("10.0.0.5", 40001), ("10.0.0.9", 9866), TCP_ESTABLISHED, 64001, 1))
    proc.add_socket("self", TcpSocket(("10.0.0.5", 40002), ("10.0.0.8", 9866), TCP_ESTABLISHED, 64002, 2),
                    ipv6=False)
    proc.add_socket("self", TcpSocket(("10.0.0.5", 40003), ("10.0.0.9", 22), TCP_ESTABLISHED, 64001, 3))
    proc.add_socket("self", TcpSocket(("10.0.0.5", 40004), ("10.0.0.9", 9866), TCP_ESTABLISHED, 1000, 4))
    proc.add_socket("self", TcpSocket(("::", 9866), ("::", 0), TCP_LISTEN, 64001, 5))
    assert storage_connections(USERS, [(None, 9866)], proc.root) == [
        OwnedConnection("10.0.0.5", 40001, "alice", "10.0.0.9", 9866),
        OwnedConnection("10.0.0.5", 40002, "bob", "10.0.0.8", 9866)]
    assert storage_connections(USERS, [("::ffff:10.0.0.9", 9866)], proc.root) == [
        OwnedConnection("10.0.0.5", 40001, "alice", "10.0.0.9", 9866)]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the client runs as another uid")
def test_real_connection_of_a_user_process_is_found():
    listener, port = create_listener()
    client = connect_as(64002, port, "HOLD\n")
    try:
        assert OwnedConnection("127.0.0.1", client.port, "bob", "127.0.0.1", port) in storage_connections(
            USERS, [(None, port)])
    finally:
        client.close()
        listener.close()


def _job_process(proc: FakeProc, pid: int, uid: int, inode: int, cgroup: str = "0::/user.slice\n",
                 environ: str = "PATH=/usr/bin\0") -> None:
    proc.process(pid, ["python3"], uid=uid)
    proc.socket_fd(pid, 5, inode)
    proc._write(proc._path(pid, "cgroup"), cgroup)
    proc._write(proc._path(pid, "environ"), environ)
    os.chown(proc._path(pid), uid, uid)   # a process's /proc dir is owned by its effective uid


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the fake /proc entries are owned by the users' uids")
def test_each_connection_names_the_job_its_process_runs_for_by_slurm_cgroup_or_environment(tmp_path):
    proc = FakeProc(str(tmp_path))
    proc.process("self", ["vnode-agent"])
    for port, inode in ((40001, 11), (40002, 12), (40003, 13), (40004, 14), (40005, 15)):
        proc.add_socket("self", TcpSocket(("10.0.0.5", port), ("10.0.0.9", 9866), TCP_ESTABLISHED, 64001, inode))
    # Slurm's cgroup wins over an environment the user could have set.
    _job_process(proc, 4001, 64001, 11, "0::/system.slice/slurmstepd.scope/job_77/step_batch/user/task_0\n",
                 "SLURM_JOB_ID=78\0")
    _job_process(proc, 4002, 64001, 12, environ="SLURM_JOB_ID=78\0")
    _job_process(proc, 4003, 64001, 13, environ="PBS_JOBID=12[3].pbs-1.example\0")
    _job_process(proc, 4004, 64001, 14, environ="SLURM_JOB_ID=../../etc\0")   # not a job id: no job
    _job_process(proc, 4005, 64002, 15, environ="SLURM_JOB_ID=90\0")   # not the socket's owner: not read
    jobs = {c.client_port: c.job for c in storage_connections(USERS, [(None, 9866)], proc.root)}
    assert jobs == {40001: "77", 40002: "78", 40003: "12[3].pbs-1.example", 40004: "", 40005: ""}


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the client runs as another uid")
def test_real_connection_of_a_slurm_job_process_names_its_job(monkeypatch):
    listener, port = create_listener()
    monkeypatch.setenv("SLURM_JOB_ID", "4242")   # the client inherits it, as a job's task does
    client = connect_as(64002, port, "HOLD\n")
    try:
        assert OwnedConnection("127.0.0.1", client.port, "bob", "127.0.0.1", port, "4242") in storage_connections(
            USERS, [(None, port)])
    finally:
        client.close()
        listener.close()
