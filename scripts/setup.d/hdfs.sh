#!/bin/sh
# Fetch the Hadoop 3.4.2 jars that the local HDFS testbed (testbed.hdfs_cluster) runs from.
# Idempotent: installs and downloads only what is missing. Run as root by scripts/setup.sh,
# which passes the venv as $1; with it, the testbed's Java client tool is compiled here too.
#
# The cache is readable by every uid because the testbed runs HDFS clients as other users
# and /root is mode 0700; as root it lives in /var/cache, otherwise in ~/.cache.
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)
version=3.4.2
if [ "$(id -u)" = 0 ]; then default_home=/var/cache/vnode-sync/hadoop-$version
else default_home=${XDG_CACHE_HOME:-$HOME/.cache}/vnode-sync/hadoop-$version; fi
home=${VNODE_SYNC_HADOOP_HOME:-$default_home}

missing=""
command -v javac >/dev/null 2>&1 || missing="$missing openjdk-17-jdk-headless"
command -v mvn >/dev/null 2>&1 || missing="$missing maven"
command -v mkfs.ext4 >/dev/null 2>&1 || missing="$missing e2fsprogs"
command -v losetup >/dev/null 2>&1 || missing="$missing mount"
if [ -n "$missing" ]; then
    echo "hdfs: apt-get install$missing"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
fi

if [ -f "$home/jars/hadoop-hdfs-$version.jar" ]; then
    echo "hdfs: jars already in $home/jars"
else
    echo "hdfs: fetching Hadoop $version jars into $home/jars"
    mkdir -p "$home"
    staging=$(mktemp -d "$home/jars.vnode-sync-partial.XXXXXX")
    trap 'rm -rf "$staging"' EXIT
    # -C: a jar whose checksum does not match fails the fetch instead of a warning.
    mvn -q -B -C -Dstyle.color=never -f "$repo/deploy/hadoop/pom.xml" \
        dependency:copy-dependencies -DoutputDirectory="$staging"
    chmod 0755 "$staging"
    mv "$staging" "$home/jars"
    trap - EXIT
fi

# hadoop-hdfs.jar has no webapps/; empty ones on the classpath are enough for /jmx and WebHDFS.
for app in hdfs datanode static; do mkdir -p "$home/web/webapps/$app"; done
if [ -n "${1:-}" ] && [ -x "$1/bin/python" ]; then
    VNODE_SYNC_HADOOP_HOME="$home" "$1/bin/python" -c \
        'from testbed.hdfs_cluster import HadoopRuntime, hadoop_home; HadoopRuntime(hadoop_home()).prepare()'
fi
chmod -R a+rX "$home"
echo "hdfs: ready: $(ls "$home/jars" | wc -l) jars in $home/jars"
