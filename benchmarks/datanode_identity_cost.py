"""What deciding a new connection's user costs a DataNode with block access tokens off, before and after
issue 27's change (the DataNode agent's Identity), on this host's kernel.

    sudo .venv/bin/python -m benchmarks.datanode_identity_cost [--rounds 200] [--sockets 200]

Runs IdentityCost (agents/datanode-throttle/src/test/java/.../IdentityCost.java, compiled by
scripts/setup.d/datanode-throttle.sh) in a JVM with the agent's jar and the Hadoop jars, with
--sockets TCP connections open on loopback, for three kinds of client of a new connection:
reported by a compute agent (a CONN line), on another host and unreported, and on this host (a
UID line). "before" is the old order: walk /proc/net/tcp and tcp6 for the socket's owner, then the
CONN lines; "after" is Identity as it is: CONN first, a lookup only for a client address of this
host, and that one by a sock_diag request naming the 4-tuple (O(1) in the kernel). Median wall and
thread CPU (user + kernel) microseconds per lookup; the last column is before/after CPU.
"""

import argparse
import os
import subprocess
import sys

from testbed.hdfs_cluster import datanode_throttle_jar, hadoop_home

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST_CLASSES = os.path.join(REPO, "agents", "datanode-throttle", "target", "test-classes")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200, help="lookups per case (each a new connection)")
    parser.add_argument("--sockets", type=int, default=200, help="TCP connections kept open meanwhile")
    args = parser.parse_args(argv)
    classpath = ":".join([datanode_throttle_jar(), TEST_CLASSES, os.path.join(hadoop_home(), "jars", "*")])
    result = subprocess.run(["java", "-Dlog4j.configuration=none", "-cp", classpath,
                             "org.vnodesync.dnthrottle.IdentityCost", str(args.rounds), str(args.sockets)],
                            capture_output=True, text=True)
    print(result.stdout, end="")
    if result.returncode != 0:
        print(result.stderr.strip()[-2000:], file=sys.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
