"""Remove what a killed benchmark run left behind: bench cgroups, mounts, loop devices, work dirs
(testbed.leftovers, limited to this suite's runs).

    sudo .venv/bin/python -m benchmarks.mpiio.cleanup

Every experiment does this itself before it starts; HDFS clusters of fig. 5 are named
vnode-sync-bench.mpiio.fig5.* and removed by `python -m testbed.hdfs_cluster cleanup-stale`.
"""

import argparse

from benchmarks.mpiio.bench_vnodes import BENCH_PREFIX
from testbed.leftovers import remove_crashed


def main() -> None:
    # No options; parsed so that --help or a typo changes nothing.
    argparse.ArgumentParser(prog="python -m benchmarks.mpiio.cleanup",
                            description=__doc__.splitlines()[0]).parse_args()
    removed = remove_crashed(BENCH_PREFIX)
    print("\n".join(map(str, removed)) if removed else "nothing to remove")


if __name__ == "__main__":
    main()
