package org.vnodesync.datanode;

import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;

/** The Unix uid that owns a TCP endpoint on this host, from /proc/net/tcp and tcp6. */
final class SocketOwners {
    private static final Path[] TABLES = {Path.of("/proc/net/tcp"), Path.of("/proc/net/tcp6")};

    private SocketOwners() {
    }

    /** A client endpoint as the DataNode names it ("/127.0.0.1:43756"). */
    record Endpoint(byte[] address, int port, String ip) {
        static Endpoint parse(String text) throws IOException {
            if (text == null) {
                return null;
            }
            String s = text.startsWith("/") ? text.substring(1) : text;
            int colon = s.lastIndexOf(':');
            if (colon <= 0) {
                return null;
            }
            String ip = s.substring(0, colon);
            if (ip.startsWith("[") && ip.endsWith("]")) {
                ip = ip.substring(1, ip.length() - 1);
            }
            byte[] address = InetAddress.getByName(Wire.ip(ip)).getAddress();  // a literal: no lookup
            return new Endpoint(address, Integer.parseInt(s.substring(colon + 1)), ip);
        }

        String key() {
            return ip + " " + port;
        }
    }

    static Integer uidOf(Endpoint endpoint) throws IOException {
        return uidOf(endpoint, TABLES);
    }

    static Integer uidOf(Endpoint endpoint, Path... tables) throws IOException {
        for (Path table : tables) {
            if (!Files.exists(table)) {
                continue;
            }
            for (String line : Files.readAllLines(table)) {
                String[] fields = line.trim().split("\\s+");
                if (fields.length < 8 || !fields[1].contains(":") || fields[0].equals("sl")) {
                    continue;
                }
                String[] local = fields[1].split(":");
                if (Integer.parseInt(local[1], 16) == endpoint.port() && sameAddress(local[0], endpoint.address())) {
                    return Integer.parseInt(fields[7]);
                }
            }
        }
        return null;
    }

    /** /proc/net/tcp{,6} print each 32-bit word of the address in host (little-endian) order. */
    static boolean sameAddress(String hex, byte[] wanted) {
        byte[] found = new byte[hex.length() / 2];
        for (int word = 0; word < found.length / 4; word++) {
            for (int i = 0; i < 4; i++) {
                int at = (word * 4 + (3 - i)) * 2;
                found[word * 4 + i] = (byte) Integer.parseInt(hex.substring(at, at + 2), 16);
            }
        }
        if (found.length == wanted.length) {
            return Arrays.equals(found, wanted);
        }
        byte[] v4 = found.length == 16 ? found : wanted;
        byte[] other = found.length == 16 ? wanted : found;
        boolean mapped = Arrays.equals(Arrays.copyOfRange(v4, 0, 12),
                new byte[] {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, (byte) 0xff, (byte) 0xff});
        return mapped && Arrays.equals(Arrays.copyOfRange(v4, 12, 16), other);
    }
}
