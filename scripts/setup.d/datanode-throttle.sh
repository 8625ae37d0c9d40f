#!/usr/bin/env bash
# The Java agent that throttles per user inside the HDFS DataNode (agents/datanode-throttle/):
# built with Maven from its pinned pom (Byte Buddy from Maven Central, Hadoop as provided).
# Idempotent: rebuilt only when a source or the pom is newer than the jar.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
project="$repo/agents/datanode-throttle"
jar="$project/target/vnode-sync-datanode-throttle.jar"

if ! command -v mvn >/dev/null || ! command -v javac >/dev/null; then
    echo "datanode-throttle: needs Maven and a JDK 17 (javac); skipped" >&2
    exit 0
fi
if [ -f "$jar" ] && [ -z "$(find "$project/pom.xml" "$project/src" -newer "$jar" -print -quit)" ]; then
    echo "datanode-throttle: up to date ($jar)"
    exit 0
fi
(cd "$project" && mvn -q -B package)
echo "datanode-throttle: built $jar"
