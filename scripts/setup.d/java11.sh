#!/bin/sh
# A Java 11 runtime beside the JDK 17 that builds everything: Hadoop 3.3 and 3.4 support Java 8 and 11
# at runtime, so CI runs DataNodes with the Java agent on 11 too (HdfsCluster(datanode_java_home=...)).
# No Java 8 runtime is packaged for this machine; the agent's --release 8 build checks that level.
#
# Debian 12 has no openjdk-11; Debian 11 (bullseye), on the same mirror, has openjdk-11-jre-headless.
# Its source is added with an apt pin that takes that one package from it and nothing else: the rest
# of bullseye is at priority -1 (never installed, never an upgrade), so its dependencies come from
# bookworm. The JDK 17 stays the default `java` (alternatives rank 17 above 11).
# Idempotent: does nothing once the runtime is there. Run as root by scripts/setup.sh.
set -eu

arch=$(dpkg --print-architecture)
home=/usr/lib/jvm/java-11-openjdk-$arch
if [ -x "$home/bin/java" ]; then
    echo "java11: ready: $home ($("$home/bin/java" -version 2>&1 | head -n 1))"
    exit 0
fi

sources=/etc/apt/sources.list.d/vnode-sync-bullseye.sources
pin=/etc/apt/preferences.d/vnode-sync-bullseye.pref
cat > "$pin" <<PIN
# scripts/setup.d/java11.sh (vnode-sync): from bullseye, the Java 11 runtime only.
Package: *
Pin: release n=bullseye
Pin-Priority: -1

Package: openjdk-11-jre-headless
Pin: release n=bullseye
Pin-Priority: 500
PIN
cat > "$sources" <<SOURCES
# scripts/setup.d/java11.sh (vnode-sync): for openjdk-11-jre-headless only; see $pin.
Types: deb
URIs: http://deb.debian.org/debian
Suites: bullseye
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES

echo "java11: apt-get install openjdk-11-jre-headless (bullseye, pinned)"
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends openjdk-11-jre-headless
"$home/bin/java" -version
echo "java11: ready: $home; default java: $(readlink -f "$(command -v java)")"
