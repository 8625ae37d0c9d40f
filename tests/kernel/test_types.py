"""What the kernel's counter files hold, parsed: only the fields the agent uses."""

from vnode_sync.kernel.types import DeviceNumber, IoCounters, parse_io_service_bytes

IO_SERVICE_BYTES = """7:3 Read 1234
7:3 Write 56
7:3 Sync 1290
7:3 Async 0
7:3 Discard 0
7:3 Total 1290
8:16 Read 0
8:16 Write 4096
8:16 Sync 0
8:16 Async 4096
8:16 Discard 0
8:16 Total 4096
Total 5386
"""


def test_io_service_bytes_gives_each_devices_read_and_write_bytes_and_nothing_of_the_totals():
    assert parse_io_service_bytes(IO_SERVICE_BYTES) == {
        DeviceNumber(7, 3): IoCounters(read_bytes=1234, write_bytes=56),
        DeviceNumber(8, 16): IoCounters(read_bytes=0, write_bytes=4096)}


def test_a_cgroup_that_moved_nothing_has_no_device():
    assert parse_io_service_bytes("Total 0\n") == {}
