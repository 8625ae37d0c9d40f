"""Issue 58's drawn-scenario benchmark on the model of a DataNode (quick iteration, not the real-HDFS figures).

    .venv/bin/python -m benchmarks.edge_model --seeds 0-99 [--profile a|b|c|d|e] [--seconds 60] [--read-slot read] [--read-ahead-kib 0]
        [--read-ahead dispatched|requests|window] [--read-ahead-piece-kib 0] [--packet-slots on|off]
        [--short-circuit on|off]
    .venv/bin/python -m benchmarks.edge_model --trace 17 [--policy WEIGHTS] [--from 5 --to 15]

Runs agents/datanode-throttle/src/test/java/.../EdgeScenarios.java (the real Dispatcher against
SimulatedNode's modelled volumes, cores and link) on Maven's test classpath, streams its lines (one per
scenario, then each figure's distribution over the seeds and the scenarios meeting each target), and
prints the command first. Without --profile, seed s draws profile "abcde"[s % 5]. Needs Maven and a
JDK (scripts/setup.d/datanode-throttle.sh), offline.
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

PROJECT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "agents", "datanode-throttle")
MAIN = "org.vnodesync.dnthrottle.EdgeScenarios"
SEEDS = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")


def maven(*goals: str) -> None:
    """Runs Maven offline on the agent; its output only if it failed (its stdout carries colour codes)."""
    done = subprocess.run(["mvn", "-q", "-o", "-B", "-f", os.path.join(PROJECT, "pom.xml"), *goals],
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"edge_model: mvn {' '.join(goals)} failed (exit {done.returncode})")


def classpath() -> str:
    """Compiles the agent's tests and returns their classpath (test-classes, classes, test-scope jars)."""
    with tempfile.NamedTemporaryFile("r", prefix="vnode-sync-edge-model-cp.", suffix=".txt") as out:
        maven("test-compile", "dependency:build-classpath", f"-Dmdep.outputFile={out.name}", "-Dmdep.includeScope=test")
        deps = out.read().strip()
    return ":".join([os.path.join(PROJECT, "target", "test-classes"), os.path.join(PROJECT, "target", "classes"), deps])


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", help="N, N-M or a comma-separated list of those (such as 0-99)")
    parser.add_argument("--profile", choices="abcde", help="every seed on this profile (default: seed %% 5)")
    parser.add_argument("--seconds", type=float, default=60.0, help="simulated seconds measured per policy")
    parser.add_argument("--net", choices=["on", "off"], default="on",
                        help="each thread's time outside the volume per packet: a read's send, a write's receive "
                             "(default on; off: the model before it)")
    parser.add_argument("--read-slot", choices=["read+send", "read"], default="read+send",
                        help="what a read's slot covers: its read and send, as Hadoop's transferTo does (default, "
                             "what ships), or its read only (a copy; tried and dropped on real HDFS: docs/edge.md "
                             "section 8)")
    parser.add_argument("--read-ahead-kib", type=int, default=4096,
                        help="the DataNode's read-ahead in KiB (default 4096: dfs.datanode.readahead.bytes, with "
                             "Hadoop's native library as production DataNodes load it; 0: none, the model before it)")
    parser.add_argument("--read-ahead", choices=["window", "requests", "dispatched"], default="dispatched",
                        help="how the read-ahead reaches the volume: Hadoop's requests (ReadaheadPool.readaheadStream) "
                             "through the dispatcher by their users' weights, as the agent orders them (default; "
                             "ReadAhead.java), the same requests unordered, or a window kept full whatever the "
                             "dispatcher does (the model before requests)")
    parser.add_argument("--read-ahead-piece-kib", type=int, default=0,
                        help="with --read-ahead dispatched: a request asks for its disk read in pieces of this many "
                             "KiB (default 0: a slice of the volume's time, Dispatcher.pieceBytes, as the agent does; "
                             "64: branch ra58's packet-sized pieces; 4096: each request whole)")
    parser.add_argument("--packet-slots", choices=["on", "off"], default="on",
                        help="with --read-ahead dispatched: a read's packets take slots of the volume's packets' "
                             "dispatcher for their copy and send, and pieces the disk reads faster than those go out "
                             "take no disk slot, as the agent does (default; branch read58c); off: the packets take "
                             "no slot and every piece a disk slot (branch ra58b)")
    parser.add_argument("--short-circuit", choices=["on", "off"], default="on",
                        help="after the seeds, tests/e2e/test_hdfs_short_circuit.py's case on the model: two readers "
                             "at 4 and 8 re-reading cached files where the cores bind (default on, about a second)")
    parser.add_argument("--trace", type=int, metavar="SEED", help="print one seed's run, one line per 100 ms")
    parser.add_argument("--policy", choices=["NONE", "STATIC", "WEIGHTS"], default="WEIGHTS")
    parser.add_argument("--from", dest="start", type=float, default=0.0, help="trace from this simulated second")
    parser.add_argument("--to", type=float, help="trace up to this simulated second")
    args = parser.parse_args(argv)
    if args.trace is None and not args.seeds:
        parser.error("--seeds (such as 0-99) or --trace SEED is required")
    if args.seeds and not SEEDS.match(args.seeds):
        parser.error(f"--seeds {args.seeds}: not N, N-M or a comma-separated list of those")
    if args.read_ahead_kib < 0:
        parser.error(f"--read-ahead-kib {args.read_ahead_kib}: must be >= 0")
    if args.read_ahead_piece_kib < 0:
        parser.error(f"--read-ahead-piece-kib {args.read_ahead_piece_kib}: must be >= 0")
    if args.seconds <= 0:
        parser.error(f"--seconds {args.seconds}: must be > 0")
    return args


def java_args(args: argparse.Namespace) -> list[str]:
    out = ["--seconds", f"{args.seconds:g}", "--net", args.net, "--read-slot", args.read_slot,
           "--read-ahead-kib", str(args.read_ahead_kib), "--read-ahead", args.read_ahead,
           "--read-ahead-piece-kib", str(args.read_ahead_piece_kib), "--packet-slots", args.packet_slots,
           "--short-circuit", args.short_circuit]
    if args.profile:
        out += ["--profile", args.profile]
    if args.trace is not None:
        out += ["--trace", str(args.trace), "--policy", args.policy, "--from", f"{args.start:g}"]
        if args.to is not None:
            out += ["--to", f"{args.to:g}"]
    else:
        out += ["--seeds", args.seeds]
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    command = "python -m benchmarks.edge_model " + shlex.join(sys.argv[1:] if argv is None else argv)
    print(f"# {command}", flush=True)
    cp = classpath()
    java = ["java", "-cp", cp, MAIN, *java_args(args)]
    print(f"# java -cp <{PROJECT}: target/test-classes, target/classes, test-scope jars> {MAIN} "
          f"{shlex.join(java_args(args))}", flush=True)
    with subprocess.Popen(java, stdout=subprocess.PIPE, text=True) as proc:
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
