"""The DataNode throttle's per-packet cost: the per-volume dispatcher against a static cap's RateBucket (JMH).

    .venv/bin/python -m benchmarks.datanode_scheduler_cost [--forks 3] [--iterations 10]

Runs agents/datanode-throttle/src/test/java/.../SchedulerCost.java with JMH on 1 and 2 threads (the
VM's cores) and prints ns per 64 KiB packet for each, and the scheduler's cost as a ratio of
RateBucket's measured in the same run, and as a share of the packet's own time at 1 GB/s (64 us).
Needs Maven and a JDK (scripts/setup.d/datanode-throttle.sh); JMH comes from Maven Central once.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

PROJECT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "agents", "datanode-throttle")
PACKET_NS_AT_1GBPS = 64 * 1024 / 1e9 * 1e9


def classpath(workdir: str) -> str:
    out = os.path.join(workdir, "cp.txt")
    subprocess.run(["mvn", "-q", "-B", "-f", os.path.join(PROJECT, "pom.xml"), "test-compile",
                    "dependency:build-classpath", f"-Dmdep.outputFile={out}", "-Dmdep.includeScope=test"],
                   check=True)
    with open(out) as f:
        deps = f.read().strip()
    return ":".join([os.path.join(PROJECT, "target", "test-classes"), os.path.join(PROJECT, "target", "classes"), deps])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--forks", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=10)
    args = parser.parse_args(argv)
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="vnode-sync-jmh.") as workdir:
        cp = classpath(workdir)
        for threads in (1, 2):
            result = os.path.join(workdir, f"t{threads}.json")
            subprocess.run(["java", "-cp", cp, "org.openjdk.jmh.Main", "SchedulerCost", "-f", str(args.forks),
                            "-wi", "5", "-w", "1", "-i", str(args.iterations), "-r", "1", "-t", str(threads),
                            "-rf", "json", "-rff", result], check=True, stdout=subprocess.DEVNULL)
            with open(result) as f:
                for entry in json.load(f):
                    name = entry["benchmark"].rsplit(".", 1)[-1]
                    metric = entry["primaryMetric"]
                    rows[(name, threads)] = (metric["score"], metric["scoreError"])
    print(f"\nns per 64 KiB packet (JMH average time, {args.forks} forks x {args.iterations} iterations; "
          f"limits never bind, nothing sleeps)")
    print(f"{'threads':>7} | {'RateBucket (static)':>18} | {'volume dispatcher':>19} | {'ratio':>6} | "
          f"{'extra ns':>8} | {'extra / packet at 1 GB/s':>24}")
    for threads in (1, 2):
        base, base_err = rows[("rateBucket", threads)]
        new, new_err = rows[("dispatch", threads)]
        print(f"{threads:>7} | {base:>10.1f} +- {base_err:<5.1f} | {new:>11.1f} +- {new_err:<5.1f} | "
              f"{new / base:>6.2f} | {new - base:>8.1f} | {(new - base) / PACKET_NS_AT_1GBPS * 100:>23.3f}%")
    print(f"\nload average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
