package org.vnodesync.dnthrottle;

import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.util.Collections;
import java.util.Enumeration;
import java.util.HashSet;
import java.util.Set;

/**
 * Whether a client address belongs to this host (loopback, the DataNode's own end of the connection,
 * or any interface's): only then can /proc or sock_diag know the client's socket. The interfaces are
 * listed at most once per REFRESH_NS, and only when an address is not known to be local.
 */
final class LocalAddresses {
    static final long REFRESH_NS = 10_000_000_000L;

    private volatile Set<InetAddress> known = Collections.emptySet();
    private volatile long listedNs = Long.MIN_VALUE / 2;

    boolean isLocal(InetAddress client, InetAddress server, long nowNs) {
        if (client.isLoopbackAddress() || client.isAnyLocalAddress() || client.equals(server)) {
            return true;
        }
        if (known.contains(client)) {
            return true;
        }
        if (nowNs - listedNs < REFRESH_NS) {
            return false;
        }
        listedNs = nowNs;
        known = list();
        return known.contains(client);
    }

    private static Set<InetAddress> list() {
        Set<InetAddress> found = new HashSet<>();
        try {
            Enumeration<NetworkInterface> interfaces = NetworkInterface.getNetworkInterfaces();
            while (interfaces != null && interfaces.hasMoreElements()) {
                found.addAll(Collections.list(interfaces.nextElement().getInetAddresses()));
            }
        } catch (SocketException e) {
            AgentLog.once("local-addresses", "could not list this host's addresses; only loopback counts", e);
        }
        return Collections.unmodifiableSet(found);
    }
}
