"""benchmarks.write_timeline: a write's steps from the NameNode's and DataNode's logs (lines as Hadoop 3.4.2 logs them)."""

import pytest

from benchmarks.write_timeline import closes_turned_down, describe, file_writes, log_lines

NAMENODE = [
    "2026-11-28 08:40:03,375 INFO hdfs.StateChange: BLOCK* allocate blk_1073741880_1056, "
    "replicas=127.0.0.1:41419 for /alice/wc-weights-12.bin",
    "2026-11-28 08:40:03,391 INFO namenode.FSNamesystem: BLOCK* blk_1073741880_1056 is COMMITTED but not "
    "COMPLETE(numNodes= 0 <  minimum = 1) in file /alice/wc-weights-12.bin",
    "2026-11-28 08:40:03,392 INFO BlockStateChange: BLOCK* addStoredBlock: 127.0.0.1:41419 is added to "
    "blk_1073741880_1056 (size=1048576)",
    "2026-11-28 08:40:03,416 INFO hdfs.StateChange: DIR* completeFile: /alice/wc-weights-12.bin is closed by "
    "DFSClient_NONMAPREDUCE_-1112386498_1",
    "2026-11-28 08:40:04,000 INFO hdfs.StateChange: BLOCK* allocate blk_1073741881_1057, "
    "replicas=127.0.0.1:41419 for /bob/big-1.bin",
    "2026-11-28 08:40:06,493 INFO hdfs.StateChange: BLOCK* allocate blk_1073741883_1059, "
    "replicas=127.0.0.1:41419 for /alice/wc-weights-14.bin",
    "2026-11-28 08:40:06,703 INFO hdfs.StateChange: DIR* completeFile: /alice/wc-weights-14.bin is closed by "
    "DFSClient_NONMAPREDUCE_-1112386498_1",
    "2026-11-28 08:40:07,000 INFO hdfs.StateChange: BLOCK* allocate blk_1073741884_1060, "
    "replicas=127.0.0.1:41419 for /alice/wc-weights-15.bin",
]


def _datanode(block: str, received: str, finalized: str) -> list[str]:
    pool = "BP-502986411-127.0.0.1-1795842998455"
    return [f"2026-11-28 {received} INFO datanode.DataNode: Receiving {pool}:{block} src: /127.0.0.1:35418 "
            "dest: /127.0.0.1:41419",
            f"2026-11-28 {finalized} INFO DataNode.clienttrace: src: /127.0.0.1:35418, dest: /127.0.0.1:41419, "
            "volume: /tmp/x/dn0/disk/hdfs, bytes: 1048576, op: HDFS_WRITE, cliID: DFSClient_NONMAPREDUCE_-1_1, "
            f"offset: 0, srvID: e54e, blockid: {pool}:{block}, duration(ns): 5817865"]


DATANODE = (_datanode("blk_1073741880_1056", "08:40:03,381", "08:40:03,389")
            + _datanode("blk_1073741881_1057", "08:40:04,010", "08:40:06,000")
            + _datanode("blk_1073741883_1059", "08:40:06,503", "08:40:06,696"))


def test_each_write_splits_into_its_wait_for_the_datanode_its_receiving_and_its_close():
    twelve, fourteen = file_writes(NAMENODE, DATANODE, "/alice/")
    assert twelve.path == "/alice/wc-weights-12.bin"
    assert (twelve.to_datanode, twelve.receiving, twelve.to_closed) == pytest.approx((0.006, 0.008, 0.027), abs=1e-6)
    assert twelve.complete_retries == 1
    assert fourteen.receiving == pytest.approx(0.193, abs=1e-6) and fourteen.complete_retries == 0
    assert fourteen.total == pytest.approx(0.210, abs=1e-6)


def test_files_outside_the_prefix_and_writes_the_logs_do_not_show_whole_are_left_out():
    # bob's file is another user's; wc-weights-15 was allocated but never reached the DataNode
    assert [w.path for w in file_writes(NAMENODE, DATANODE, "/alice/")] == ["/alice/wc-weights-12.bin",
                                                                          "/alice/wc-weights-14.bin"]


def test_the_description_gives_milliseconds_and_marks_retried_closes():
    assert describe(file_writes(NAMENODE, DATANODE, "/alice/")) == "6/8/27 r1, 10/193/7"


def test_closes_turned_down_counts_each_files_retries_and_none_for_a_file_closed_at_once():
    twice = NAMENODE + [NAMENODE[1].replace("08:40:03,391", "08:40:03,399")]
    counts = closes_turned_down(twice)
    assert counts["/alice/wc-weights-12.bin"] == 2
    assert counts["/alice/wc-weights-14.bin"] == 0


def test_a_log_is_read_line_by_line_whatever_its_bytes(tmp_path):
    log = tmp_path / "namenode.log"
    log.write_bytes(NAMENODE[1].encode() + b"\n\xff garbage\n")
    lines = log_lines(str(log))
    assert len(lines) == 2 and closes_turned_down(lines)["/alice/wc-weights-12.bin"] == 1
