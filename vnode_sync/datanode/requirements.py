"""What a DataNode with the throttler needs that only its Java agent sees, checked at each handshake.

The Java agent's HELLO names the JVM the DataNode runs on and block tokens as the DataNode's
Configuration has them (docs/deploy-hdfs.md, #1 and #6). Each one unmet is a line of the node's
`degraded` list (`vnodectl nodes`); the node still enforces. A value the agent does not report (a jar
older than these keys) is not judged: the version line already names that jar.
"""

import re

from vnode_sync.datanode.channel import AgentHello

# Java at runtime, per Hadoop line (Apache's "Hadoop Java Versions"): 3.3 and 3.4 support 8 and 11;
# server-side 17 comes with 3.5. A line not listed here is not judged.
RUNTIME_JAVA = {(3, 3): (8, 11), (3, 4): (8, 11)}
BLOCK_TOKENS = "dfs.block.access.token.enable"


def java_major(version: str) -> int | None:
    """8 for "1.8.0_392", 11 for "11.0.24", 21 for "21"; None for anything else."""
    found = re.match(r"(?:1\.)?(\d+)", version)
    return int(found.group(1)) if found else None


def hadoop_line(version: str) -> tuple[int, int] | None:
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found.group(1)), int(found.group(2))) if found else None


def unmet(hello: AgentHello) -> list[str]:
    """One line per required setting the handshake shows missing: what it is, what it costs, the fix."""
    lines = []
    major, line = java_major(hello.java), hadoop_line(hello.hadoop)
    supported = RUNTIME_JAVA.get(line) if line else None
    if major is not None and supported and major not in supported:
        lines.append(f"DataNode JVM: Java {major} ({hello.java}) under Hadoop {hello.hadoop}, whose line supports "
                     f"Java {' and '.join(map(str, supported))} at runtime: run the DataNode on Java "
                     f"{supported[-1]} (docs/deploy-hdfs.md #1)")
    if hello.block_tokens == "false":
        lines.append(f"block tokens: {BLOCK_TOKENS} is false in the DataNode's configuration: pipeline replicas, "
                     "WebHDFS and clients on other hosts are charged to the default VNode; set it to true on the "
                     "NameNodes and DataNodes and restart them (docs/deploy-hdfs.md #6)")
    return lines
