"""benchmarks.block_trace: a device's requests from the kernel's block tracepoints, mapped to the
files they read, and one user's transfers set against the other requests on the disk."""

import os
import tempfile

from tests.conftest import needs_kernel, unique_name
from benchmarks.block_trace import BlockTrace, Request, SectorOwners, parse_requests, transfer_spans
from testbed import tracefs
from testbed.loopdev import format_ext4, loop_device, mount_ext4, unmount

LINES = [
    "           java-4711    [001] ..... 33171.499000: block_rq_insert: 7,3 R 131072 () 1000 + 256 [java]",
    "           java-4711    [001] ..... 33171.500000: block_rq_issue: 7,3 R 131072 () 1000 + 256 [java]",
    "  kworker/1:1-99      [000] ..... 33171.501000: block_rq_issue: 7,3 RA 262144 () 5000 + 512 [kworker]",
    "          <idle>-0       [001] ..s1. 33171.502500: block_rq_complete: 7,3 R () 1000 + 256 [0]",
    "          <idle>-0       [001] ..s1. 33171.510000: block_rq_complete: 7,3 RA () 5000 + 512 [0]",
    "          <idle>-0       [001] ..s1. 33171.511000: block_rq_complete: 7,3 R () 9999 + 8 [0]",   # issue not seen
]


def test_requests_are_each_issue_paired_with_the_completion_of_its_sector_and_its_insertion():
    assert parse_requests(LINES) == [Request(33171.5, 33171.5025, 1000, 256, "R", inserted=33171.499),
                                     Request(33171.501, 33171.51, 5000, 512, "RA")]


def test_a_transfer_counts_the_other_users_requests_ahead_of_it_and_served_within_it():
    def owner(sector):
        return "alice" if sector < 100 else "bob"
    requests = [Request(0.990, 1.004, 500, 512, "R"),      # bob's, in flight as she starts
                Request(1.000, 1.010, 0, 256, "R"), Request(1.004, 1.020, 10, 512, "R"),
                Request(1.012, 1.030, 600, 512, "R"),      # bob's, completed after her last
                Request(3.000, 3.005, 20, 256, "R")]       # her next transfer, 2 s on
    first, second = transfer_spans(requests, owner, "alice", other="bob")
    assert (first.start, first.end, first.bytes) == (1.0, 1.02, 768 * 512)
    assert [round(w, 6) for w in first.waits_ms] == [10.0, 16.0]
    assert (first.others_in_flight, first.others_during) == (512 * 512, 512 * 512)
    assert (second.bytes, second.others_in_flight, second.others_during) == (256 * 512, 0, 0)


@needs_kernel
def test_a_block_trace_sees_a_files_reads_on_its_device_and_leaves_no_instance_behind(run_name):
    mounted_before = os.path.isdir(tracefs.INSTANCES)
    mountpoint = tempfile.mkdtemp(prefix=run_name + ".mnt.")
    with loop_device(run_name, size_mb=64) as (device, dev):
        format_ext4(device)
        mount_ext4(device, mountpoint)
        try:
            path = os.path.join(mountpoint, "data")
            with open(path, "wb") as f:
                f.write(os.urandom(1 << 20))
                f.flush()
                os.fsync(f.fileno())
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            name = unique_name("blocks")
            with BlockTrace(name, dev) as trace:
                with open(path, "rb") as f:
                    assert len(f.read()) == 1 << 20
            spans = transfer_spans(trace.requests(), SectorOwners({"reader": [path]}).owner, "reader")
        finally:
            unmount(mountpoint)
            os.rmdir(mountpoint)
    assert len(spans) == 1 and spans[0].bytes == 1 << 20
    assert not any(os.path.basename(p) == name for p in tracefs.instances())
    assert os.path.isdir(tracefs.INSTANCES) == mounted_before
