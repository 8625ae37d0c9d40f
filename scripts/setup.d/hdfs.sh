#!/bin/sh
# Fetch the jars of every Hadoop line the local HDFS testbed (testbed.hdfs_cluster) supports
# (deploy/hadoop/lines.txt; VNODE_SYNC_HADOOP_LINES="3.2.4 ..." fetches others instead), one cache
# dir per version, and install MIT Kerberos (the secure testbed's KDC, kinit) and curl (SPNEGO).
# Idempotent: installs and downloads only what is missing. Run as root by scripts/setup.sh,
# which passes the venv as $1; with it, the testbed's Java client tool is compiled here too.
#
# The cache is readable by every uid because the testbed runs HDFS clients as other users
# and /root is mode 0700; as root it lives in /var/cache, otherwise in ~/.cache.
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)
lines=${VNODE_SYNC_HADOOP_LINES:-$(grep -v '^#' "$repo/deploy/hadoop/lines.txt" | tr '\n' ' ')}
if [ "$(id -u)" = 0 ]; then default_cache=/var/cache/vnode-sync
else default_cache=${XDG_CACHE_HOME:-$HOME/.cache}/vnode-sync; fi
cache=${VNODE_SYNC_HADOOP_CACHE:-$default_cache}

missing=""
command -v javac >/dev/null 2>&1 || missing="$missing openjdk-17-jdk-headless"
command -v mvn >/dev/null 2>&1 || missing="$missing maven"
command -v mkfs.ext4 >/dev/null 2>&1 || missing="$missing e2fsprogs"
command -v losetup >/dev/null 2>&1 || missing="$missing mount"
command -v curl >/dev/null 2>&1 || missing="$missing curl"
# krb5kdc and kdb5_util (krb5-kdc), kadmin.local (krb5-admin-server), kinit (krb5-user).
command -v krb5kdc >/dev/null 2>&1 || missing="$missing krb5-kdc"
command -v kadmin.local >/dev/null 2>&1 || missing="$missing krb5-admin-server"
command -v kinit >/dev/null 2>&1 || missing="$missing krb5-user"
if [ -n "$missing" ]; then
    echo "hdfs: apt-get install$missing"
    apt-get update -q
    # The packages' own KDC services are not used (the testbed runs a KDC per cluster) and stay
    # stopped where policy-rc.d or a missing init system says so.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
fi

for version in $lines; do
    home=$cache/hadoop-$version
    if [ -f "$home/jars/hadoop-hdfs-$version.jar" ]; then
        echo "hdfs: Hadoop $version jars already in $home/jars"
    else
        echo "hdfs: fetching Hadoop $version jars into $home/jars"
        mkdir -p "$home"
        staging=$(mktemp -d "$home/jars.vnode-sync-partial.XXXXXX")
        trap 'rm -rf "$staging"' EXIT
        # -C: a jar whose checksum does not match fails the fetch instead of a warning.
        mvn -q -B -C -Dstyle.color=never -f "$repo/deploy/hadoop/pom.xml" -Dhadoop.version="$version" \
            dependency:copy-dependencies -DoutputDirectory="$staging"
        chmod 0755 "$staging"
        mv "$staging" "$home/jars"
        trap - EXIT
    fi
    # hadoop-hdfs.jar has no webapps/; empty ones on the classpath are enough for /jmx and WebHDFS.
    for app in hdfs datanode static; do mkdir -p "$home/web/webapps/$app"; done
    if [ -n "${1:-}" ] && [ -x "$1/bin/python" ]; then
        VNODE_SYNC_HADOOP_CACHE="$cache" "$1/bin/python" -c \
            'import sys; from testbed.hdfs_cluster import HadoopRuntime; HadoopRuntime.of(sys.argv[1]).prepare()' \
            "$version"
    fi
    chmod -R a+rX "$home"
    echo "hdfs: ready: Hadoop $version, $(ls "$home/jars" | wc -l) jars in $home/jars"
done

# libhadoop.so (deploy/hadoop/native.txt), loaded only by clusters with short-circuit reads on.
artifact=$(grep -v '^#' "$repo/deploy/hadoop/native.txt" | head -n 1)
case "$(uname -m)" in
    x86_64) arch=Linux-amd64 ;;
    aarch64) arch=Linux-aarch64 ;;
    *) arch="" ;;
esac
native=$cache/hadoop-native-${artifact##*:}
if [ -z "$arch" ]; then
    echo "hdfs: no libhadoop.so for $(uname -m); short-circuit reads will be skipped"
elif [ -f "$native/libhadoop.so" ]; then
    echo "hdfs: libhadoop.so already in $native"
else
    echo "hdfs: fetching libhadoop.so ($artifact) into $native"
    mkdir -p "$cache"
    staging=$(mktemp -d "$cache/native.vnode-sync-partial.XXXXXX")
    trap 'rm -rf "$staging"' EXIT
    mvn -q -B -C -Dstyle.color=never -f "$repo/deploy/hadoop/pom.xml" dependency:copy -Dartifact="$artifact" \
        -Dmdep.stripVersion=true -DoutputDirectory="$staging"
    (cd "$staging" && jar xf ./*.jar "nativelib/$arch/libhadoop.so" && mv "nativelib/$arch/libhadoop.so" . \
        && rm -rf nativelib ./*.jar)
    chmod -R a+rX "$staging"
    rm -rf "$native"
    mv "$staging" "$native"
    trap - EXIT
fi
