package org.vnodesync.dnthrottle;

import com.sun.jna.Native;
import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.OptionalLong;

/**
 * The owner of one TCP socket by its 4-tuple, asked of the kernel with one sock_diag request (what `ss`
 * uses, net/ipv4/inet_diag.c): the kernel looks the socket up in its hash table, O(1), where printing
 * /proc/net/tcp walks all of it (262,144 buckets here, ~12 ms of CPU per file). A request that names
 * the socket exactly (no NLM_F_DUMP) answers one inet_diag_msg, or an error (ENOENT: no such socket).
 * libc is reached through JNA (Java has no netlink sockets); where JNA cannot load, `available()`
 * is false and Identity walks /proc instead.
 */
final class SockDiag implements OwnerLookup {
    private static final int AF_INET = 2;
    private static final int AF_INET6 = 10;
    private static final int AF_NETLINK = 16;
    private static final int SOCK_DGRAM = 2;
    private static final int SOCK_CLOEXEC = 0x80000;
    private static final int NETLINK_SOCK_DIAG = 4;
    private static final short SOCK_DIAG_BY_FAMILY = 20;
    private static final short NLM_F_REQUEST = 1;
    private static final short NLMSG_ERROR = 2;
    private static final int IPPROTO_TCP = 6;
    private static final int ALL_STATES = 0xFFF;
    private static final int HEADER = 16;
    private static final int REQUEST = HEADER + 56;   // nlmsghdr + inet_diag_req_v2
    private static final int UID_OFFSET = HEADER + 4 + 48 + 12;  // family..retrans, sockid, expires/rqueue/wqueue

    /** libc, bound once by JNA's direct mapping (no per-call reflection). */
    private static final class LibC {
        static final Throwable FAILURE;

        static {
            Throwable failure = null;
            try {
                Native.register("c");
            } catch (Throwable e) {
                failure = e;
            }
            FAILURE = failure;
        }

        static native int socket(int domain, int type, int protocol);

        static native long sendto(int fd, byte[] buf, long len, int flags, byte[] addr, int addrlen);

        static native long recv(int fd, byte[] buf, long len, int flags);

        static native int close(int fd);
    }

    /** Whether the kernel can be asked here; the reason it cannot, for the log. */
    static Throwable unavailable() {
        try {
            return LibC.FAILURE;
        } catch (Throwable e) {
            return e;  // JNA not on the class path at all
        }
    }

    @Override
    public OptionalLong ownerOf(Policy.Endpoint client, Policy.Endpoint server) throws IOException {
        if (server == null) {
            throw new IOException("sock_diag needs both ends of the connection");
        }
        InetAddress c = client.address();
        InetAddress s = server.address();
        if (c instanceof Inet4Address && s instanceof Inet4Address) {
            OptionalLong found = ask(AF_INET, client, server);
            if (found.isPresent()) {
                return found;
            }
            // A dual-stack client's IPv4 connection is an IPv6 socket with v4-mapped addresses.
            return ask(AF_INET6, client, server);
        }
        return ask(AF_INET6, client, server);
    }

    private static OptionalLong ask(int family, Policy.Endpoint client, Policy.Endpoint server) throws IOException {
        byte[] request = request(family, client, server);
        byte[] reply = new byte[512];
        byte[] kernel = new byte[12];  // struct sockaddr_nl: AF_NETLINK, pid 0 (the kernel), groups 0
        kernel[0] = (byte) AF_NETLINK;
        int fd = LibC.socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
        if (fd < 0) {
            throw new IOException("sock_diag: no netlink socket");
        }
        try {
            if (LibC.sendto(fd, request, request.length, 0, kernel, kernel.length) != request.length) {
                throw new IOException("sock_diag: request not sent");
            }
            long n = LibC.recv(fd, reply, reply.length, 0);
            if (n < HEADER) {
                throw new IOException("sock_diag: no answer");
            }
            ByteBuffer in = ByteBuffer.wrap(reply, 0, (int) n).order(ByteOrder.nativeOrder());
            short type = in.getShort(4);
            if (type == NLMSG_ERROR) {
                return OptionalLong.empty();  // ENOENT: no such socket (the client is gone, or not this family)
            }
            if (type != SOCK_DIAG_BY_FAMILY || n < UID_OFFSET + 4) {
                throw new IOException("sock_diag: unexpected answer type " + type);
            }
            return OptionalLong.of(Integer.toUnsignedLong(in.getInt(UID_OFFSET)));
        } finally {
            LibC.close(fd);
        }
    }

    /** nlmsghdr + inet_diag_req_v2 naming the client's socket: source = the client, destination = us. */
    static byte[] request(int family, Policy.Endpoint client, Policy.Endpoint server) {
        ByteBuffer out = ByteBuffer.allocate(REQUEST).order(ByteOrder.nativeOrder());
        out.putInt(REQUEST).putShort(SOCK_DIAG_BY_FAMILY).putShort(NLM_F_REQUEST).putInt(1).putInt(0);
        out.put((byte) family).put((byte) IPPROTO_TCP).put((byte) 0).put((byte) 0).putInt(ALL_STATES);
        out.order(ByteOrder.BIG_ENDIAN).putShort((short) client.port()).putShort((short) server.port());
        out.put(address(family, client.address())).put(address(family, server.address()));
        out.order(ByteOrder.nativeOrder()).putInt(0).putInt(-1).putInt(-1);  // any interface; INET_DIAG_NOCOOKIE
        return out.array();
    }

    /** 16 bytes in network order: an IPv4 address first (AF_INET) or v4-mapped (AF_INET6). */
    private static byte[] address(int family, InetAddress address) {
        byte[] raw = address.getAddress();
        byte[] out = new byte[16];
        if (raw.length == 16) {
            System.arraycopy(raw, 0, out, 0, 16);
        } else if (family == AF_INET) {
            System.arraycopy(raw, 0, out, 0, 4);
        } else {
            out[10] = (byte) 0xFF;
            out[11] = (byte) 0xFF;
            System.arraycopy(raw, 0, out, 12, 4);
        }
        return out;
    }
}
