package org.vnodesync.dnthrottle;

import java.io.IOException;
import java.net.InetAddress;
import java.util.Objects;
import java.util.OptionalLong;

/**
 * Decides whom an op serves, before its first byte: the block token's user (or the job VNode of that user a
 * CONN line names); else the remote connection
 * (CONN lines, from the compute agents: a map lookup); else, for a client on this host only, the owner
 * of its socket (UID lines), asked of the kernel by 4-tuple (sock_diag, O(1)) or, where that cannot be
 * done, found by walking /proc/net/tcp; else nobody (DEFAULT). A client on another host that no CONN
 * line names costs no lookup at all.
 */
final class Identity {
    /** The socket owner found for one connection: its DataXceiver's address strings and the uid (or none). */
    private static final class Owner {
        private final String remoteAddress;
        private final String localAddress;
        private final OptionalLong uid;

        Owner(String remoteAddress, String localAddress, OptionalLong uid) {
            this.remoteAddress = remoteAddress;
            this.localAddress = localAddress;
            this.uid = uid;
        }

        String remoteAddress() {
            return remoteAddress;
        }

        String localAddress() {
            return localAddress;
        }

        OptionalLong uid() {
            return uid;
        }
    }

    private final OwnerLookup owners;
    private final LocalAddresses local;
    // A DataXceiver thread serves one connection for its whole life (HDFS starts a thread per accepted
    // peer), and a socket's owner cannot change: the connection's later ops (a client's peer cache
    // reuses connections for later blocks) reuse the first op's lookup instead of walking
    // /proc/net/tcp again. Keyed by the addresses too, so a thread that served another connection
    // (tests do) never gets its answer.
    private final ThreadLocal<Owner> connectionOwner = new ThreadLocal<>();

    Identity(OwnerLookup owners) {
        this(owners, new LocalAddresses());
    }

    Identity(OwnerLookup owners, LocalAddresses local) {
        this.owners = owners;
        this.local = local;
    }

    /** TOKEN_USER may be null or empty; addresses are DataXceiver's strings like "/127.0.0.1:50010". */
    String resolve(Policy policy, String tokenUser, String remoteAddress, String localAddress) throws IOException {
        Policy.Endpoint client = parseAddress(remoteAddress);
        String reported = client == null ? null : policy.connections().get(client);
        if (tokenUser != null && !tokenUser.isEmpty()) {
            // A compute agent may name one of the token user's batch jobs ("user.job"): its own VNode.
            return reported != null && reported.startsWith(tokenUser + ".") ? reported : tokenUser;
        }
        if (client == null) {
            return null;
        }
        if (reported != null) {
            return reported;
        }
        if (policy.uids().isEmpty()) {
            return null;
        }
        Policy.Endpoint server = parseAddress(localAddress);
        if (!local.isLocal(client.address(), server == null ? null : server.address(), System.nanoTime())) {
            return null;  // another host's socket: nothing here can name its owner
        }
        OptionalLong uid = ownerOf(client, remoteAddress, localAddress);
        return uid.isPresent() ? policy.uids().get(uid.getAsLong()) : null;
    }

    private OptionalLong ownerOf(Policy.Endpoint client, String remoteAddress, String localAddress) throws IOException {
        Owner known = connectionOwner.get();
        if (known != null && known.remoteAddress().equals(remoteAddress)
                && Objects.equals(known.localAddress(), localAddress)) {
            return known.uid();
        }
        OptionalLong uid = owners.ownerOf(client, parseAddress(localAddress));
        connectionOwner.set(new Owner(remoteAddress, localAddress, uid));
        return uid;
    }

    /** "/1.2.3.4:5", "host/1.2.3.4:5", "/[::1]:5" or "/0:0:0:0:0:0:0:1:5" -> endpoint; null if not TCP. */
    static Policy.Endpoint parseAddress(String text) {
        if (text == null) {
            return null;
        }
        String s = text.substring(text.lastIndexOf('/') + 1);
        int colon = s.lastIndexOf(':');
        if (colon <= 0) {
            return null;
        }
        String host = s.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        try {
            InetAddress address = ApplyParser.ipLiteral("", host);
            int port = Integer.parseInt(s.substring(colon + 1));
            return new Policy.Endpoint(address, port);
        } catch (ApplyParser.BadApply | NumberFormatException e) {
            return null;
        }
    }
}
