"""benchmarks.disk_warm_up on a real two-DataNode HDFS: every disk written over, the space given back."""

import os

import pytest

from benchmarks.disk_warm_up import WARM_UP_PATH, free_bytes, warm_up_disks
from tests.conftest import needs_java, needs_kernel, unique_name
from testbed.hdfs_cluster import HdfsCluster, hadoop_home, hadoop_version, has_jars

MiB = 1 << 20
BOB_UID = 64_203

needs_hadoop = pytest.mark.skipif(
    not has_jars(), reason=f"needs the Hadoop {hadoop_version()} jars in {hadoop_home()}; run scripts/setup.d/hdfs.sh")


def sectors_written(device_number) -> int:
    with open(f"/sys/dev/block/{device_number}/stat") as f:
        return int(f.read().split()[6])


@pytest.mark.parametrize("fraction", [0, 1, -0.5, 1.5])
def test_a_fraction_outside_zero_to_one_is_refused_before_anything_is_written(fraction):
    with pytest.raises(ValueError, match="allowed between 0 and 1"):
        warm_up_disks(None, BOB_UID, "bob", fraction=fraction)


@needs_kernel
@needs_java
@needs_hadoop
@pytest.mark.slow
def test_every_datanode_disk_is_written_over_and_has_its_space_back():
    with HdfsCluster(unique_name("warm"), datanodes=2, disk_mb=256) as hdfs:   # replication 1: the warm-up sets 2
        free = {dn.id: free_bytes(dn.mountpoint) for dn in hdfs.datanodes}
        written = {dn.id: sectors_written(dn.device_number) for dn in hdfs.datanodes}
        mbps = warm_up_disks(hdfs, BOB_UID, "bob", fraction=0.5)
        size = min(free.values()) * 0.5 - MiB
        for dn in hdfs.datanodes:
            assert (sectors_written(dn.device_number) - written[dn.id]) * 512 >= size, dn.id
            assert free_bytes(dn.mountpoint) >= 0.98 * free[dn.id], dn.id
        assert mbps > 0
        listed = hdfs.shell("-ls", "/", check=False)
        assert WARM_UP_PATH not in listed.stdout
