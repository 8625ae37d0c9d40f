"""Is this DataNode's Java agent ready to enforce: its control socket answers the handshake with every
required hook woven. What the deploy role waits for after restarting a DataNode, before the next one.

    python -m vnode_sync.datanode.readiness SOCKET

Prints one line. Exit 0: ready (the agent's version, Hadoop's, the hooks); 1: the agent answered but a
required hook is not woven, or it speaks another protocol (the node would not enforce: do not go on);
4: nothing answers on SOCKET yet (a DataNode still starting; retry).
"""

import argparse
import sys

from vnode_sync.datanode.channel import REQUIRED_HOOKS, ThrottleChannel
from vnode_sync.errors import Unavailable, VNodeSyncError

READY, NOT_ENFORCING, NO_ANSWER = 0, 1, 4


def readiness(socket_path: str, timeout: float) -> tuple[int, str]:
    """(exit code, the one line that says why) for the Java agent on socket_path."""
    try:
        hello = ThrottleChannel(socket_path, timeout).hello()
    except Unavailable as e:
        return NO_ANSWER, str(e)
    except VNodeSyncError as e:
        return NOT_ENFORCING, str(e)
    if missing := hello.missing_hooks():
        return NOT_ENFORCING, (f"{socket_path}: agent {hello.version} (Hadoop {hello.hadoop}) would not enforce: "
                               + "; ".join(f"hook {h} {state}: {REQUIRED_HOOKS[h]}" for h, state in sorted(missing.items())))
    return READY, (f"{socket_path}: agent {hello.version}, protocol {hello.protocol}, Hadoop {hello.hadoop}: "
                   f"ready, {len(REQUIRED_HOOKS)} required hooks woven")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vnode_sync.datanode.readiness", description=__doc__.splitlines()[0])
    parser.add_argument("socket", help="the Java agent's control socket (its -javaagent socket= argument)")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the answer (default 5)")
    args = parser.parse_args(argv)
    code, line = readiness(args.socket, args.timeout)
    print(line, file=sys.stdout if code == READY else sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
