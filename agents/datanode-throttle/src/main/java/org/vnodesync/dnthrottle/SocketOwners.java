package org.vnodesync.dnthrottle;

import java.io.BufferedReader;
import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.OptionalLong;

/**
 * Finds the Unix owner of the client end of a TCP connection made on this host, from /proc/net/tcp and
 * /proc/net/tcp6 (a client on another host has no entry here, so "found" also means "same host").
 */
final class SocketOwners implements OwnerLookup {
    private final Path procNet;
    private final boolean littleEndian;

    SocketOwners(Path procNet) {
        this(procNet, ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN);
    }

    SocketOwners(Path procNet, boolean littleEndian) {
        this.procNet = procNet;
        this.littleEndian = littleEndian;
    }

    /**
     * The uid owning the socket bound to CLIENT and connected to SERVER (SERVER may be null: any peer).
     * The kernel prints these files by walking its whole TCP hash table (262,144 buckets on a host with
     * a few GB of RAM: ~12 ms of CPU per file here, however few sockets there are), and it prints them as
     * they are read, so the lines are read one at a time and reading stops at the client's line: on
     * average half the walk. An IPv4 client is looked for in tcp first (tcp6 holds it only when the
     * client's socket is dual-stack); an IPv6 one only in tcp6.
     */
    @Override
    public OptionalLong ownerOf(Policy.Endpoint client, Policy.Endpoint server) throws IOException {
        // A line is parsed only when its local port is the client's (the kernel prints ports as 4
        // upper-case hex digits).
        String port = String.format(":%04X ", client.port());
        String[] files = client.address() instanceof Inet4Address ? new String[] {"tcp", "tcp6"} : new String[] {"tcp6"};
        for (String file : files) {
            try (BufferedReader lines = Files.newBufferedReader(procNet.resolve(file), StandardCharsets.US_ASCII)) {
                lines.readLine();  // the header
                for (String line; (line = lines.readLine()) != null; ) {
                    int at = line.indexOf(port);
                    if (at < 0 || at > 48) {  // not in the local_address column (after "sl" and 32 hex digits at most)
                        continue;
                    }
                    OptionalLong uid = ownerOnLine(line, client, server);
                    if (uid != null) {
                        return uid;
                    }
                }
            } catch (NoSuchFileException e) {
                // no IPv6 (or no IPv4) on this kernel
            }
        }
        return OptionalLong.empty();
    }

    /** The line's uid if it is CLIENT's socket (to SERVER); null if it is another socket. */
    private OptionalLong ownerOnLine(String line, Policy.Endpoint client, Policy.Endpoint server) {
        String[] f = line.trim().split("\\s+");
        if (f.length < 8) {
            return null;
        }
        Policy.Endpoint local = endpoint(f[1]);
        if (local == null || !local.equals(client)) {
            return null;
        }
        if (server != null && !server.equals(endpoint(f[2]))) {
            return null;
        }
        try {
            return OptionalLong.of(Long.parseLong(f[7]));
        } catch (NumberFormatException e) {
            return OptionalLong.empty();
        }
    }

    /** "0100007F:1F90" (or 32 hex digits for IPv6), in the kernel's per-32-bit-word host byte order. */
    Policy.Endpoint endpoint(String text) {
        int colon = text.indexOf(':');
        if (colon != 8 && colon != 32) {
            return null;
        }
        try {
            byte[] address = new byte[colon / 2];
            for (int word = 0; word < colon / 8; word++) {
                long value = Long.parseLong(text.substring(word * 8, word * 8 + 8), 16);
                for (int b = 0; b < 4; b++) {
                    int shift = littleEndian ? 8 * b : 8 * (3 - b);
                    address[word * 4 + b] = (byte) (value >>> shift);
                }
            }
            int port = Integer.parseInt(text.substring(colon + 1), 16);
            // A v4-mapped IPv6 address comes back as an Inet4Address, so both files compare alike.
            return new Policy.Endpoint(InetAddress.getByAddress(address), port);
        } catch (NumberFormatException | UnknownHostException | StringIndexOutOfBoundsException e) {
            return null;
        }
    }
}
