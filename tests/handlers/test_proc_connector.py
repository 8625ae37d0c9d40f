"""Process-connector records, decoded from bytes and received from the real kernel."""

import os
import struct
import subprocess
import sys
import threading
import time

import pytest

from testbed.fake_datanode import set_thread_name
from vnode_sync.agents.handlers.proc_connector import (PROC_EVENT_COMM, PROC_EVENT_EXEC, PROC_EVENT_EXIT,
                                                       PROC_EVENT_FORK, NetlinkThreadEvents, PollingThreadEvents,
                                                       ProcConnector, ProcEvent, open_thread_events,
                                                       parse_proc_events, watch_filter)


def record(what: int, data: bytes, stamp: int = 123) -> bytes:
    event = struct.pack("=IIQ", what, 0, stamp) + data
    cn = struct.pack("=IIIIHH", 1, 1, 0, 0, len(event), 0) + event
    return struct.pack("=IHHII", 16 + len(cn), 3, 0, 0, 0) + cn


def test_fork_comm_and_exit_records_decode():
    datagram = (record(PROC_EVENT_FORK, struct.pack("=iiii", 1, 1, 501, 500))
                + record(PROC_EVENT_COMM, struct.pack("=ii16s", 501, 500, b"DataXceiver for"))
                + record(PROC_EVENT_EXIT, struct.pack("=iiIIii", 501, 500, 0, 17, 1, 1))
                + record(0x4, struct.pack("=iiii", 1, 1, 0, 0)))  # uid change: not used, skipped
    assert parse_proc_events(datagram) == [
        ProcEvent(PROC_EVENT_FORK, 501, 500, 123),
        ProcEvent(PROC_EVENT_COMM, 501, 500, 123, "DataXceiver for"),
        ProcEvent(PROC_EVENT_EXIT, 501, 500, 123)]


def _named_thread(name: str, stop: threading.Event) -> threading.Thread:
    def body():
        set_thread_name(name)
        stop.wait()
    return threading.Thread(target=body)


@pytest.mark.skipif(os.geteuid() != 0, reason="the process connector needs CAP_NET_ADMIN (root)")
def test_netlink_wakes_on_a_new_thread_within_milliseconds():
    events = open_thread_events("/proc", "netlink")
    assert isinstance(events, NetlinkThreadEvents)
    stop = threading.Event()
    thread = _named_thread("DataXceiver for", stop)
    try:
        thread.start()
        changes = events.wait(os.getpid(), 2.0)
        woke = time.monotonic_ns()
        assert thread.native_id in changes.born
        assert (woke - changes.born[thread.native_id]) / 1e6 < 50  # ms from the fork record's stamp
        if thread.native_id not in changes.renamed:
            changes = events.wait(os.getpid(), 2.0)
        assert changes.renamed[thread.native_id] == "DataXceiver for"
        stop.set()
        thread.join()
        assert thread.native_id in events.wait(os.getpid(), 0.3).exited  # exits do not wake: waits it out
        other = events.wait(1, 0.05)  # records of other processes are not reported
        assert not other.born and not other.renamed
    finally:
        stop.set()
        events.close()


def test_polling_sees_new_threads_of_the_process():
    events = PollingThreadEvents("/proc", 0.002)
    assert "polling" in events.describe()
    events.wait(os.getpid(), 0.0)
    stop = threading.Event()
    thread = _named_thread("poll-probe", stop)
    thread.start()
    try:
        deadline = time.monotonic() + 2
        born: set[int] = set()
        while thread.native_id not in born and time.monotonic() < deadline:
            born |= set(events.wait(os.getpid(), 0.5).born)
        assert thread.native_id in born
    finally:
        stop.set()
        thread.join()


def test_a_fake_proc_root_falls_back_to_polling_and_says_why(tmp_path):
    events = open_thread_events(str(tmp_path), "auto")
    assert isinstance(events, PollingThreadEvents)
    assert "not the live /proc" in events.describe()
    with pytest.raises(ValueError, match="auto, netlink, poll"):
        open_thread_events(str(tmp_path), "ebpf")


@pytest.mark.skipif(os.geteuid() != 0, reason="the process connector needs CAP_NET_ADMIN (root)")
def test_the_kernel_drops_records_about_other_processes_but_not_exec():
    connector = ProcConnector()
    try:
        connector.watch(os.getpid())
        stop = threading.Event()
        thread = _named_thread("filter-probe", stop)
        thread.start()
        other = subprocess.Popen([sys.executable, "-c", "import threading; t = threading.Thread(target=int); "
                                                        "t.start(); t.join()"])
        other.wait()
        stop.set()
        thread.join()
        seen: list[ProcEvent] = []
        deadline = time.monotonic() + 1.0
        awaited = {(PROC_EVENT_EXEC, other.pid), (PROC_EVENT_EXIT, thread.native_id)}  # the exit may come late
        while time.monotonic() < deadline and not awaited <= {(e.kind, e.tid) for e in seen}:
            seen += connector.read(0.2)
        ours = {(e.kind, e.tid) for e in seen if e.tgid == os.getpid()}
        assert (PROC_EVENT_FORK, thread.native_id) in ours
        assert (PROC_EVENT_COMM, thread.native_id) in ours
        assert (PROC_EVENT_EXIT, thread.native_id) in ours
        assert {e.kind for e in seen if e.tgid == other.pid} == {PROC_EVENT_EXEC}  # no fork, thread, exit
        assert all(e.tgid in (os.getpid(), other.pid) or e.kind == PROC_EVENT_EXEC for e in seen)
    finally:
        connector.close()


def test_the_filter_program_keeps_exec_and_the_watched_process_only():
    program = watch_filter(500)
    assert len(program) % 8 == 0 and len(program) // 8 < 16

    def verdict(what: int, data: bytes) -> bool:
        return run_classic_bpf(program, record(what, data)) != 0

    assert verdict(PROC_EVENT_FORK, struct.pack("=iiii", 1, 1, 501, 500))       # a thread of 500
    assert not verdict(PROC_EVENT_FORK, struct.pack("=iiii", 9, 500, 502, 502))  # 500's parent: a new process
    assert verdict(PROC_EVENT_COMM, struct.pack("=ii16s", 501, 500, b"x"))
    assert not verdict(PROC_EVENT_EXIT, struct.pack("=iiIIii", 601, 600, 0, 17, 1, 1))
    assert verdict(PROC_EVENT_EXEC, struct.pack("=ii", 700, 700))
    assert verdict(PROC_EVENT_EXEC, struct.pack("=ii", 700, 700)) == (
        run_classic_bpf(watch_filter(None), record(PROC_EVENT_EXEC, struct.pack("=ii", 700, 700))) != 0)
    assert run_classic_bpf(watch_filter(None), record(PROC_EVENT_FORK, struct.pack("=iiii", 1, 1, 7, 7))) == 0


def run_classic_bpf(program: bytes, packet: bytes) -> int:
    """Just the instructions watch_filter uses: absolute word loads, jeq and ret (filter.h)."""
    instructions = list(struct.iter_unpack("=HBBI", program))
    accumulator, pc = 0, 0
    while True:
        code, jt, jf, k = instructions[pc]
        if code == 0x20:
            if k + 4 > len(packet):
                return 0
            accumulator = int.from_bytes(packet[k:k + 4], "big")
        elif code == 0x15:
            pc += jt if accumulator == k else jf
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")
        pc += 1
