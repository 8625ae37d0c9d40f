"""The datanode-throttle backend against a stand-in for the Java agent's channel (the real one is
exercised by tests/datanode_throttle and tests/e2e/test_hdfs_datanode_throttle.py): what it sends,
when, what it reports, and the handshake that refuses an agent it cannot speak to."""

import re
import socket
import threading

import pytest

from vnode_sync.datanode.backend import DataNodeThrottleBackend
from vnode_sync.datanode.channel import (REQUIRED_HOOKS, AgentHello, Counters, NodeCapacity, Share, Shares,
                                         Stats, ThrottleChannel, ThrottleSettings, WEIGHT_RANGE)
from vnode_sync.errors import InvalidArgument, Unavailable, Unsupported
from vnode_sync.kernel.backend import DEFAULT_VNODE, VolumeQueue
from vnode_sync.kernel.types import WHOLE_NODE, DeviceCapacity, DeviceLimits, DeviceNumber

SDB, SDC = DeviceNumber(8, 16), DeviceNumber(8, 32)
ALL_WOVEN = {hook: "woven" for hook in REQUIRED_HOOKS}


class RecordingChannel:
    def __init__(self, hooks=None):
        self.applied: list[ThrottleSettings] = []
        self.counters: dict[str, Counters] = {}
        self.hooks = dict(ALL_WOVEN if hooks is None else hooks)
        self.started_ms = 7
        self.hellos = 0
        self.fail = None                        # what hello() and stats() raise
        self.node: dict[str, float] = {}        # the STATS NODE line's numbers
        self.volumes: tuple[VolumeQueue, ...] = ()   # the VOLUME lines
        self.stats_read = 0

    def hello(self) -> AgentHello:
        self.hellos += 1
        if self.fail:
            raise self.fail
        return AgentHello(2, "0.2.0", "3.4.2", self.started_ms, dict(self.hooks), self.java, self.block_tokens)

    java, block_tokens = "", ""   # what the DataNode's HELLO says of its JVM and block tokens ("": not said)

    def apply(self, settings: ThrottleSettings) -> None:
        self.applied.append(settings)

    def stats(self) -> Stats:
        self.stats_read += 1
        if self.fail:
            raise self.fail
        generation = self.applied[-1].generation if self.applied else 0
        return Stats(self.started_ms, generation, self.counters.pop("", Counters()), dict(self.counters),
                     dict(self.node), self.volumes)


@pytest.fixture
def backend():
    clock = [100.0]
    b = DataNodeThrottleBackend(RecordingChannel(), [SDB, SDC], clock=lambda: clock[0])
    b.clock_value = clock
    return b


def test_a_users_node_share_is_sent_as_given_its_devices_ignored_and_sent_once_per_change(backend):
    backend.set_capacities([DeviceCapacity(SDB, 60, 50), DeviceCapacity(SDC, 40, 50)])
    backend.ensure_vnode("vnode.alice", 1001)
    backend.apply_limits("vnode.alice", [DeviceLimits(SDB, read_bps=10, write_bps=5), DeviceLimits(SDC, read_bps=20)],
                         Shares(Share(16, 3, 30), Share(16, 0, 0)))
    backend.ensure_vnode("vnode.bob", 1002)
    backend.apply_limits("vnode.bob", [DeviceLimits(SDB), DeviceLimits(SDC)], Shares(Share(8), Share(8)))
    backend.ensure_vnode(DEFAULT_VNODE)
    backend.apply_limits(DEFAULT_VNODE, [DeviceLimits(SDB, read_bps=1, write_bps=2)],
                         Shares(Share(1, 0, 1), Share(1, 0, 2)))
    assert backend.channel.applied == []                     # buffered until the pass ends
    backend.commit({1001: "alice"}, {("10.0.0.7", 41000): "alice"})
    sent = backend.channel.applied[-1]
    # Weights scaled so the node's largest is 1000: only ratios matter.
    assert sent.users["alice"] == Shares(Share(1000, 3, 30), Share(1000, 0, 0))
    assert sent.users["bob"] == Shares(Share(500, 0, 0), Share(500, 0, 0))
    assert sent.default == Shares(Share(62.5, 0, 1), Share(62.5, 0, 2))
    assert sent.node == NodeCapacity(100, 100, (SDB, SDC))
    assert sent.lines()[1] == "NODE read_capacity_bps=100 write_capacity_bps=100 devices=8:16,8:32"
    assert sent.lines()[-3:] == ["UID uid=1001 name=alice", "CONN ip=10.0.0.7 port=41000 name=alice", "END"]
    assert "USER name=bob read_weight=500 read_floor_bps=0 read_ceiling_bps=0 write_weight=500" in " ".join(sent.lines())
    backend.commit({1001: "alice"}, {("10.0.0.7", 41000): "alice"})
    assert len(backend.channel.applied) == 1                 # nothing changed: nothing sent
    backend.remove_vnode("vnode.alice")
    backend.commit({}, {})
    assert "alice" not in backend.channel.applied[-1].users and backend.channel.applied[-1].generation == 2


def test_with_sharing_rates_it_sends_the_ceilings_it_is_given_and_no_capacity(backend):
    backend.sharing = "rates"
    assert not backend.shares_by_weight
    backend.set_capacities([DeviceCapacity(SDB, 60, 60)])
    backend.ensure_vnode("vnode.alice")
    backend.apply_limits("vnode.alice", [DeviceLimits(SDB, read_bps=10, write_bps=5)], Shares.ceilings(10, 5))
    backend.commit({}, {})
    sent = backend.channel.applied[-1]
    assert sent.users["alice"] == Shares.ceilings(10, 5) and sent.node == NodeCapacity()


def test_usage_counts_per_user_and_says_who_waited(backend):
    for vnode in ("vnode.alice", "vnode.bob", DEFAULT_VNODE):
        backend.ensure_vnode(vnode)
    backend.commit({}, {})
    backend.channel.counters = {"alice": Counters(read_bytes=5, write_wait_ns=0), "bob": Counters(write_bytes=7)}
    backend.usage()
    backend.clock_value[0] += 1.0
    backend.channel.counters = {"alice": Counters(read_bytes=9, read_wait_ns=300_000_000),
                                "bob": Counters(write_bytes=9, write_wait_ns=50_000_000)}
    usage = backend.usage()
    assert list(usage["vnode.alice"].devices) == [WHOLE_NODE]   # the node's, on no disk
    assert usage["vnode.alice"].devices[WHOLE_NODE].read_bytes == 9
    assert usage["vnode.alice"].held_at_limit and not usage["vnode.bob"].held_at_limit


def test_usage_keeps_each_volumes_queue_and_forgets_them_when_stats_fail(backend):
    assert backend.volume_queues == ()                        # no STATS read yet
    backend.channel.volumes = (VolumeQueue("DS-1", 1, 52e6, 3), VolumeQueue("DS-2", 2, 40e6, 0))
    backend.usage()
    assert backend.volume_queues == backend.channel.volumes
    backend.channel.fail = Unavailable("DataNode throttle socket /s: connection refused")
    with pytest.raises(Unavailable):
        backend.usage()
    assert backend.volume_queues == ()                        # not the last queues, as if they were current


def test_the_volumes_are_read_from_the_java_agents_volume_lines(tmp_path):
    """The VOLUME lines as Dispatcher.statsLine() writes them; keys this side does not know are skipped."""
    reply = (b"NODE started_ms=7 read_capacity_bps=60000000 write_capacity_bps=60000000 volumes=2\n"
             b"VOLUME id=DS-5f1c-11 depth=1 in_flight=1 waiting=2 moved_bps=54000000 probes=3 moves=0\n"
             b"VOLUME id=node depth=2 in_flight=0 waiting=0 moved_bps=0 probes=0 moves=1 future=7\n"
             b"DEFAULT read_bytes=1\nOK generation=0\n")
    backend = DataNodeThrottleBackend(serve_once(tmp_path, reply))
    backend.usage()
    assert backend.volume_queues == (VolumeQueue("DS-5f1c-11", 1, 54e6, 2), VolumeQueue("node", 2, 0.0, 0))


def test_a_datanode_that_restarted_gets_the_shares_again_and_a_new_handshake(backend):
    backend.setup()
    backend.ensure_vnode("vnode.alice")
    backend.commit({}, {})
    backend.channel.applied.clear()          # the DataNode restarted: it knows no generation
    backend.channel.started_ms = 8
    backend.usage()
    backend.setup()
    backend.commit({}, {})
    assert len(backend.channel.applied) == 1
    assert backend.channel.hellos == 2


def test_the_handshake_is_made_once_while_every_hook_holds(backend):
    for _ in range(3):
        backend.setup()
    assert backend.channel.hellos == 1
    assert backend.not_enforcing() is None


def test_a_hook_left_unwoven_makes_the_node_not_enforcing_with_the_reason(backend):
    backend.channel.hooks["BlockSender.sendBlock"] = "skipped"
    backend.setup()
    why = backend.not_enforcing()
    assert why == ("DataNode throttle agent 0.2.0 (Hadoop 3.4.2): hook BlockSender.sendBlock skipped: reads are "
                   "not scheduled: the node is not enforcing")
    backend.setup()
    assert backend.channel.hellos == 2          # asked again each pass until every hook holds
    backend.channel.hooks["BlockSender.sendBlock"] = "woven"
    backend.setup()
    assert backend.not_enforcing() is None


def test_a_required_hook_the_agent_does_not_name_counts_as_missing_and_extra_ones_are_ignored(backend):
    del backend.channel.hooks["DataXceiver.readBlock"]
    backend.channel.hooks["DataXceiver.requestShortCircuitFds"] = "not_found"
    backend.setup()
    assert "hook DataXceiver.readBlock absent" in backend.not_enforcing()
    assert "requestShortCircuitFds" not in backend.not_enforcing()


def test_a_java_agent_of_another_release_enforces_and_the_node_is_degraded_naming_both_versions(backend):
    backend.version = "0.3.0"
    assert backend.degraded() == [], "before the handshake there is no version to compare"
    backend.setup()
    assert backend.not_enforcing() is None
    assert backend.degraded() == ["DataNode throttle: the Java agent is version 0.2.0, this storage agent 0.3.0: "
                                  "install the jar of release 0.3.0 and restart the DataNode"]
    backend.version = "0.2.0"
    assert backend.degraded() == []


@pytest.mark.parametrize("java,block_tokens,expected", [
    ("11.0.24", "true", []),
    ("1.8.0_392", "true", []),
    ("", "", []),   # a jar that does not report them: not judged
    ("17.0.9", "true", ["DataNode JVM: Java 17 (17.0.9) under Hadoop 3.4.2, whose line supports Java 8 and 11 at "
                        "runtime: run the DataNode on Java 11 (docs/deploy-hdfs.md #1)"]),
    ("11.0.24", "false", ["block tokens: dfs.block.access.token.enable is false in the DataNode's configuration: "
                          "pipeline replicas, WebHDFS and clients on other hosts are charged to the default VNode; set "
                          "it to true on the NameNodes and DataNodes and restart them (docs/deploy-hdfs.md #6)"]),
])
def test_a_datanode_on_a_jvm_its_hadoop_does_not_support_or_without_block_tokens_enforces_and_is_degraded_naming_it(
        backend, java, block_tokens, expected):
    backend.version = "0.2.0"
    backend.channel.java, backend.channel.block_tokens = java, block_tokens
    backend.setup()
    assert backend.not_enforcing() is None
    assert backend.degraded() == expected


def test_an_agent_it_cannot_speak_to_is_not_enforcing_and_the_pass_goes_on(backend):
    backend.channel.fail = Unsupported("the Java agent on /s is too old")
    backend.setup()                              # does not raise: the reconcile pass must go on
    assert backend.not_enforcing() == "DataNode throttle: the Java agent on /s is too old"


def test_teardown_lifts_every_share(backend):
    backend.ensure_vnode("vnode.alice")
    backend.apply_limits("vnode.alice", [DeviceLimits(SDB, read_bps=10)])
    backend.commit({}, {})
    backend.teardown()
    assert backend.channel.applied[-1].users == {} and backend.channel.applied[-1].default == Shares()


def test_a_bad_user_name_or_share_never_reaches_the_wire():
    with pytest.raises(InvalidArgument):
        ThrottleSettings(1, Shares(), {"../etc": Shares()}).lines()
    for bad_job in ("alice.x", "alice.1/..", "alice.12[3]"):
        with pytest.raises(InvalidArgument):
            ThrottleSettings(1, Shares(), connections={("10.0.0.5", 1): bad_job}).lines()
    # A job's VNode (`user.job`) is a name the Java agent keys flows by.
    assert "CONN ip=10.0.0.5 port=1 name=alice.77" in ThrottleSettings(
        1, Shares(), {"alice.77": Shares()}, connections={("10.0.0.5", 1): "alice.77"}).lines()
    with pytest.raises(InvalidArgument):
        ThrottleSettings(1, Shares(Share(float("nan")))).lines()


def test_weights_go_on_the_wire_with_their_significant_digits():
    line = ThrottleSettings(1, Shares(Share(2.5, 0, 0), Share(1e-7, 0, 0))).lines()[2]
    assert line == ("DEFAULT read_weight=2.5 read_floor_bps=0 read_ceiling_bps=0 write_weight=1e-07 "
                    "write_floor_bps=0 write_ceiling_bps=0")


@pytest.mark.parametrize("weight", [1.5e-16, 3e-10, 1.234567891e-5, 0.25, 1 / 3, 12345.678, 5e-324])
def test_a_weight_keeps_its_digits_on_the_wire(weight):
    text = ThrottleSettings(1, Shares(Share(weight, 0, 0))).lines()[2].split()[1].split("=")[1]
    assert re.fullmatch(r"[0-9]{1,15}(\.[0-9]{1,15})?([eE][-+]?[0-9]{1,3})?", text), text  # Fields.REAL
    assert float(text) > 0 and abs(float(text) - weight) <= 1e-8 * weight


def test_a_tiny_weight_beside_others_stays_a_weight_within_the_nodes_range():
    # "0" on the wire means "not weighted" (the ceiling only): a standby weight of 1e-16 beside 8 must not
    # become it, nor push the dispatcher's tags past a double's byte resolution (issue 58).
    lines = ThrottleSettings(1, Shares(Share(8, 0, 0), Share(1, 0, 0)),
                             {"idle": Shares(Share(1e-16, 0, 0), Share(0, 0, 5)),
                              "busy": Shares(Share(2, 0, 0), Share(3e-6, 0, 0))}).lines()
    fields = {line.split()[1]: dict(f.split("=") for f in line.split()[1:] if "=" in f)
              for line in lines if line.startswith("USER")}
    assert float(fields["name=idle"]["read_weight"]) == pytest.approx(8 / WEIGHT_RANGE, rel=1e-8)
    assert fields["name=idle"]["write_weight"] == "0"      # 0 stays "not weighted"
    assert float(fields["name=busy"]["write_weight"]) == 3e-6   # within the range: as it is


def serve_once(tmp_path, reply: bytes) -> ThrottleChannel:
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


def test_the_channel_reports_a_missing_socket_and_a_refusal_in_one_line(tmp_path):
    with pytest.raises(Unavailable, match="throttle socket .*missing"):
        ThrottleChannel(str(tmp_path / "missing")).ping()
    with pytest.raises(InvalidArgument, match="refused: user '../etc'"):
        serve_once(tmp_path, b"ERR user '../etc' is not a POSIX user name; nothing changed\n").stats()


def test_hello_reads_protocol_hadoop_and_hooks_and_skips_keys_it_does_not_know(tmp_path):
    hello = serve_once(tmp_path, b"OK protocol=2 min_protocol=2 agent=vnode-sync-datanode-throttle version=0.2.0 "
                                 b"hadoop=3.3.6 started_ms=17 scheduler=sfq-depth future_key=9 "
                                 b"hook.BlockSender.sendBlock=woven hook.DataXceiver.readBlock=not_found\n").hello()
    assert hello == AgentHello(2, "0.2.0", "3.3.6", 17, {"BlockSender.sendBlock": "woven",
                                                         "DataXceiver.readBlock": "not_found"})
    assert hello.missing_hooks() == {"DataXceiver.readBlock": "not_found", "DataXceiver.writeBlock": "absent",
                                     "BlockReceiver.receiveBlock": "absent",
                                     "ReplicaOutputStreams.writeDataToDisk": "absent"}


def test_hello_reads_the_datanodes_jvm_and_block_tokens(tmp_path):
    hello = serve_once(tmp_path, b"OK protocol=2 min_protocol=2 agent=vnode-sync-datanode-throttle version=0.3.0 "
                                 b"hadoop=3.4.2 started_ms=17 java=11.0.24 block_tokens=false\n").hello()
    assert (hello.java, hello.block_tokens) == ("11.0.24", "false")


@pytest.mark.parametrize("reply,message", [
    (b"ERR unknown request 'HELLO protocol=2'\n", "cannot speak protocol 2: unknown request 'HELLO protocol=2'"),
    (b"ERR protocol 2 is not spoken here: this agent (0.3.0) speaks 3..3\n",
     "cannot speak protocol 2: protocol 2 is not spoken here: this agent \\(0.3.0\\) speaks 3..3"),
    (b"OK protocol=3 agent=vnode-sync-datanode-throttle version=0.3.0 started_ms=1\n",
     "answered protocol 3; this storage agent speaks 2"),
])
def test_an_agent_that_cannot_speak_protocol_2_is_refused_in_one_line(tmp_path, reply, message):
    with pytest.raises(Unsupported, match=message) as e:
        serve_once(tmp_path, reply).hello()
    assert "\n" not in str(e.value)


def test_stats_are_parsed_into_counters_per_user_and_unknown_keys_and_lines_are_skipped(tmp_path):
    stats = serve_once(tmp_path, b"NODE started_ms=17 read_rate_bps=5 cpu_busy=0.5\n"
                                 b"DEFAULT read_bytes=1 write_bytes=2 read_wait_ns=3 write_wait_ns=4 read_ops=5 "
                                 b"write_ops=6 read_held_ns=99\n"
                                 b"SYSTEM read_bytes=4\n"
                                 b"USER name=alice read_bytes=10 write_bytes=20\nOK generation=3\n").stats()
    assert stats == Stats(17, 3, Counters(1, 2, 3, 4, 5, 6), {"alice": Counters(10, 20)},
                          {"started_ms": 17, "read_rate_bps": 5, "cpu_busy": 0.5})


@pytest.mark.parametrize("reply", [
    b"NODE started_ms=17\nVOLUME id=../x depth=1 moved_bps=0 waiting=0\nDEFAULT read_bytes=1\n"
    b"OK generation=3\n",                                                                            # not a storage ID
    b"NODE started_ms=17\nVOLUME id=DS-1 depth=1 moved_bps=0\nDEFAULT read_bytes=1\nOK generation=3\n",  # no waiting
    b"NODE started_ms=17\nVOLUME id=DS-1 depth=0 moved_bps=0 waiting=0\nDEFAULT read_bytes=1\n"
    b"OK generation=3\n",                                                                            # no depth below 1
    b"NODE started_ms=17\nVOLUME id=DS-1 depth=1 moved_bps=nan waiting=0\nDEFAULT read_bytes=1\n"
    b"OK generation=3\n",
    b"NODE started_ms=17\nDEFAULT read_bytes=1\nUSER name=../etc read_bytes=1\nOK generation=3\n",   # no user name
    b"NODE started_ms=17\nDEFAULT read_bytes=-6\nOK generation=3\n",                                   # below zero
    b"NODE started_ms=17\nDEFAULT read_bytes=x\nOK generation=3\n",                                    # not a number
    b"NODE started_ms=17\nUSER name=alice\nOK generation=3\n",                                          # no DEFAULT
    b"DEFAULT read_bytes=1\nOK generation=3\n",                                                        # no NODE
    b"NODE started_ms=17\nDEFAULT read_bytes=1\nOK generation=three\n",
    b"NODE started_ms=17\nDEFAULT read_bytes=1\nOK 3\n",                                               # protocol 1
])
def test_a_malformed_stats_reply_is_one_line_error(tmp_path, reply):
    with pytest.raises(Unavailable, match="malformed STATS") as e:
        serve_once(tmp_path, reply).stats()
    assert "\n" not in str(e.value)


def test_an_apply_answered_for_another_generation_is_an_error(tmp_path):
    with pytest.raises(Unavailable, match="APPLY 4 answered 'OK generation=3'"):
        serve_once(tmp_path, b"OK generation=3\n").apply(ThrottleSettings(4, Shares()))


def test_ping_refuses_a_socket_that_is_not_the_java_agent(tmp_path):
    with pytest.raises(Unavailable, match="not vnode-sync's Java agent"):
        serve_once(tmp_path, b"OK something else\n").ping()
