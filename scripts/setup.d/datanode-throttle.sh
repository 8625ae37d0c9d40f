#!/bin/sh
# Build the DataNode Java agent (agents/datanode-throttle) into target/vnode-sync-datanode-throttle.jar.
# Idempotent: skipped while the jar is newer than the pom and every source. Uses the same local Maven
# repository as hdfs.sh, so after the first run it needs no network.
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)
project=$repo/agents/datanode-throttle
jar=$project/target/vnode-sync-datanode-throttle.jar

# Runs before hdfs.sh (alphabetical), so it installs the same build tools itself when missing.
missing=""
command -v javac >/dev/null 2>&1 || missing="$missing openjdk-17-jdk-headless"
command -v mvn >/dev/null 2>&1 || missing="$missing maven"
if [ -n "$missing" ]; then
    echo "datanode-throttle: apt-get install$missing"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
fi
if [ -f "$jar" ] && [ -z "$(find "$project/pom.xml" "$project/src" -newer "$jar" -print -quit)" ]; then
    echo "datanode-throttle: $jar is up to date"
    exit 0
fi
echo "datanode-throttle: building $jar"
mvn -q -B -Dstyle.color=never -f "$project/pom.xml" package
chmod a+r "$jar"
echo "datanode-throttle: ready: $jar"
