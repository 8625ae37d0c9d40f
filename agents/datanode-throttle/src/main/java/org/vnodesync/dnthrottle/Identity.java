package org.vnodesync.dnthrottle;

import java.io.IOException;
import java.net.InetAddress;
import java.util.OptionalLong;

/**
 * Decides whom an op serves, before its first byte: the block token's user; else the owner of the client's
 * socket on this host (UID lines); else the remote connection (CONN lines); else nobody (DEFAULT).
 */
final class Identity {
    private final SocketOwners owners;

    Identity(SocketOwners owners) {
        this.owners = owners;
    }

    /** TOKEN_USER may be null or empty; addresses are DataXceiver's strings like "/127.0.0.1:50010". */
    String resolve(Policy policy, String tokenUser, String remoteAddress, String localAddress) throws IOException {
        if (tokenUser != null && !tokenUser.isEmpty()) {
            return tokenUser;
        }
        Policy.Endpoint client = parseAddress(remoteAddress);
        if (client == null) {
            return null;
        }
        if (!policy.uids().isEmpty()) {
            OptionalLong uid = owners.ownerOf(client, parseAddress(localAddress));
            if (uid.isPresent()) {
                String user = policy.uids().get(uid.getAsLong());
                if (user != null) {
                    return user;
                }
            }
        }
        return policy.connections().get(client);
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
