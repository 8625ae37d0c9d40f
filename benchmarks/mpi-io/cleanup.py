"""Remove what a killed benchmark run left behind: bench cgroups, mounts, loop devices, tmpfs images.

    sudo .venv/bin/python benchmarks/mpi-io/cleanup.py

Every experiment does this itself before it starts; HDFS clusters of fig. 5 are named
vnode-sync-bench.mpiio.fig5.* and removed by `python -m testbed.hdfs_cluster cleanup-stale`.
"""

from bench_vnodes import BENCH_PREFIX, remove_leftovers
from experiment import run_alive
from slow_disk import remove_stale_disks


def main() -> None:
    removed = remove_leftovers() + remove_stale_disks(BENCH_PREFIX, run_alive)
    print("\n".join(removed) if removed else "nothing to remove")


if __name__ == "__main__":
    main()
