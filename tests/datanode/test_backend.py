"""The datanode-throttle backend against a stand-in for the Java agent's channel (the real one is
exercised by tests/e2e/test_hdfs_datanode_throttle.py): what it sends, when, and what it reports."""

import socket
import threading

import pytest

from vnode_sync.datanode.backend import DataNodeThrottleBackend
from vnode_sync.datanode.channel import Counters, Rates, Stats, ThrottleChannel, ThrottleSettings
from vnode_sync.errors import InvalidArgument, Unavailable
from vnode_sync.kernel.backend import DEFAULT_VNODE
from vnode_sync.kernel.types import DeviceLimits, DeviceNumber

SDB, SDC = DeviceNumber(8, 16), DeviceNumber(8, 32)


class RecordingChannel:
    def __init__(self):
        self.applied: list[ThrottleSettings] = []
        self.counters: dict[str, Counters] = {}

    def apply(self, settings: ThrottleSettings) -> None:
        self.applied.append(settings)

    def stats(self) -> Stats:
        generation = self.applied[-1].generation if self.applied else 0
        return Stats(0, generation, self.counters.pop("", Counters()), dict(self.counters))


@pytest.fixture
def backend():
    clock = [100.0]
    b = DataNodeThrottleBackend(RecordingChannel(), [SDB, SDC], clock=lambda: clock[0])
    b.clock_value = clock
    return b


def test_a_users_rate_is_the_sum_of_its_device_shares_and_is_sent_once_per_change(backend):
    backend.ensure_vnode("vnode.alice", 1001)
    backend.apply_limits("vnode.alice", [DeviceLimits(SDB, read_bps=10, write_bps=5), DeviceLimits(SDC, read_bps=20)])
    backend.ensure_vnode(DEFAULT_VNODE)
    backend.apply_limits(DEFAULT_VNODE, [DeviceLimits(SDB, read_bps=1, write_bps=2)])
    assert backend.channel.applied == []                     # buffered until the pass ends
    backend.commit({1001: "alice"}, {("10.0.0.7", 41000): "alice"})
    sent = backend.channel.applied[-1]
    assert (sent.default, sent.users) == (Rates(1, 2), {"alice": Rates(30, 5)})
    assert sent.lines()[-3:] == ["UID 1001 alice", "CONN 10.0.0.7 41000 alice", "END"]
    backend.commit({1001: "alice"}, {("10.0.0.7", 41000): "alice"})
    assert len(backend.channel.applied) == 1                 # nothing changed: nothing sent
    backend.remove_vnode("vnode.alice")
    backend.commit({}, {})
    assert backend.channel.applied[-1].users == {} and backend.channel.applied[-1].generation == 2


def test_usage_counts_per_user_and_says_who_waited_at_the_limit(backend):
    for vnode in ("vnode.alice", "vnode.bob", DEFAULT_VNODE):
        backend.ensure_vnode(vnode)
    backend.commit({}, {})
    backend.channel.counters = {"alice": Counters(read_bytes=5, write_wait_ns=0), "bob": Counters(write_bytes=7)}
    backend.usage()
    backend.clock_value[0] += 1.0
    backend.channel.counters = {"alice": Counters(read_bytes=9, read_wait_ns=300_000_000),
                                "bob": Counters(write_bytes=9, write_wait_ns=50_000_000)}
    usage = backend.usage()
    assert usage["vnode.alice"].devices == {SDB: usage["vnode.alice"].devices[SDB]}   # reported on the first disk
    assert usage["vnode.alice"].devices[SDB].read_bytes == 9
    assert usage["vnode.alice"].held_at_limit and not usage["vnode.bob"].held_at_limit


def test_a_datanode_that_restarted_gets_the_rates_again(backend):
    backend.ensure_vnode("vnode.alice")
    backend.commit({}, {})
    backend.channel.applied.clear()          # the DataNode restarted: it knows no generation
    backend.usage()
    backend.commit({}, {})
    assert len(backend.channel.applied) == 1


def test_teardown_lifts_every_limit(backend):
    backend.ensure_vnode("vnode.alice")
    backend.apply_limits("vnode.alice", [DeviceLimits(SDB, read_bps=10)])
    backend.commit({}, {})
    backend.teardown()
    assert backend.channel.applied[-1].users == {} and backend.channel.applied[-1].default == Rates()


def test_a_bad_user_name_never_reaches_the_wire():
    with pytest.raises(InvalidArgument):
        ThrottleSettings(1, Rates(), {"../etc": Rates()}).lines()


def test_the_channel_reports_a_missing_socket_and_a_refusal_in_one_line(tmp_path):
    with pytest.raises(Unavailable, match="throttle socket .*missing"):
        ThrottleChannel(str(tmp_path / "missing")).ping()
    path = str(tmp_path / "s")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)

    def answer():
        conn, _ = server.accept()
        conn.recv(4096)
        conn.sendall(b"ERR user '../etc' is not a POSIX user name; nothing changed\n")
        conn.close()
    threading.Thread(target=answer, daemon=True).start()
    with pytest.raises(InvalidArgument, match="refused: user '../etc'"):
        ThrottleChannel(path).stats()
    server.close()


def answering(tmp_path, reply: bytes) -> ThrottleChannel:
    """A channel to a socket that answers one request with `reply`."""
    path = str(tmp_path / "one.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)

    def answer():
        conn, _ = server.accept()
        conn.recv(4096)
        conn.sendall(reply)
        conn.close()
        server.close()
    threading.Thread(target=answer, daemon=True).start()
    return ThrottleChannel(path)


def test_stats_are_parsed_into_counters_per_user(tmp_path):
    stats = answering(tmp_path, b"STARTED 17\nDEFAULT 1 2 3 4 5 6\nUSER alice 10 20 30 40 50 60\nOK 3\n").stats()
    assert stats == Stats(17, 3, Counters(1, 2, 3, 4, 5, 6), {"alice": Counters(10, 20, 30, 40, 50, 60)})


@pytest.mark.parametrize("reply", [
    b"STARTED 17\nDEFAULT 1 2 3 4 5 6\nUSER alice 10 20\nOK 3\n",            # a short line
    b"STARTED 17\nDEFAULT 1 2 3 4 5 6\nUSER ../etc 1 2 3 4 5 6\nOK 3\n",      # a name that is no user name
    b"STARTED 17\nDEFAULT 1 2 3 4 5 -6\nOK 3\n",                              # a counter below zero
    b"STARTED 17\nUSER alice 1 2 3 4 5 6\nOK 3\n",                            # no DEFAULT line
    b"STARTED 17\nDEFAULT 1 2 3 4 5 6\nSURPRISE\nOK 3\n",                     # a line the contract does not name
    b"STARTED 17\nDEFAULT 1 2 3 4 5 6\nOK three\n",
])
def test_a_malformed_stats_reply_is_one_line_error(tmp_path, reply):
    with pytest.raises(Unavailable, match="malformed STATS") as e:
        answering(tmp_path, reply).stats()
    assert "\n" not in str(e.value)


def test_an_apply_answered_for_another_generation_is_an_error(tmp_path):
    with pytest.raises(Unavailable, match="APPLY 4 answered 'OK 3'"):
        answering(tmp_path, b"OK 3\n").apply(ThrottleSettings(4, Rates()))


def test_ping_refuses_a_socket_that_is_not_the_java_agent(tmp_path):
    with pytest.raises(Unavailable, match="not vnode-sync's Java agent"):
        answering(tmp_path, b"OK something else\n").ping()
