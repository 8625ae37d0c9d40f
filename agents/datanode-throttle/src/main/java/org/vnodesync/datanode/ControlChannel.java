package org.vnodesync.datanode;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashMap;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The storage agent's channel into the DataNode: a Unix socket only the DataNode's user (and
 * root) may open. Line protocol of DATANODE_CHANNEL.md: PING, APPLY ... END, STATS.
 */
final class ControlChannel {
    private static final Logger LOG = LoggerFactory.getLogger(ControlChannel.class);
    private static final int MAX_LINE = 4096;
    private static final int MAX_LINES = 200_000;

    private ControlChannel() {
    }

    static void start(Path socket) throws IOException {
        Path directory = socket.toAbsolutePath().getParent();
        Files.createDirectories(directory);
        Files.setPosixFilePermissions(directory, PosixFilePermissions.fromString("rwx------"));
        Files.deleteIfExists(socket);  // a stale one from a DataNode that died
        ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        server.bind(UnixDomainSocketAddress.of(socket));
        Files.setPosixFilePermissions(socket, PosixFilePermissions.fromString("rw-------"));
        Thread acceptor = new Thread(() -> accept(server), "vnode-sync-throttle-control");
        acceptor.setDaemon(true);
        acceptor.start();
    }

    private static void accept(ServerSocketChannel server) {
        while (server.isOpen()) {
            try {
                SocketChannel client = server.accept();
                Thread session = new Thread(() -> serve(client), "vnode-sync-throttle-session");
                session.setDaemon(true);
                session.start();
            } catch (IOException e) {
                LOG.warn("vnode-sync throttle: control socket: {}", e.toString());
            }
        }
    }

    private static void serve(SocketChannel client) {
        try (client;
             BufferedReader in = new BufferedReader(new InputStreamReader(Channels.newInputStream(client),
                     StandardCharsets.UTF_8));
             Writer out = new OutputStreamWriter(Channels.newOutputStream(client), StandardCharsets.UTF_8)) {
            String line;
            while ((line = in.readLine()) != null) {
                out.write(answer(line, in));
                out.flush();
            }
        } catch (IOException e) {
            LOG.debug("vnode-sync throttle: control session ended: {}", e.toString());
        }
    }

    static String answer(String request, BufferedReader in) throws IOException {
        String[] words = request.trim().split(" ");
        switch (words[0]) {
            case "PING":
                return "OK vnode-sync-datanode-throttle " + ThrottleAgent.VERSION + " started=" + Registry.STARTED + "\n";
            case "STATS": {
                StringBuilder reply = new StringBuilder();
                for (String line : Registry.stats()) {
                    reply.append(line).append('\n');
                }
                return reply.append("OK ").append(Registry.rates().generation()).append('\n').toString();
            }
            case "APPLY":
                return apply(words, in);
            default:
                return "ERR unknown request '" + clip(words[0]) + "' (PING, APPLY, STATS)\n";
        }
    }

    /** Reads the whole set through END, checks every line, and only then replaces the rates. */
    private static String apply(String[] words, BufferedReader in) throws IOException {
        String error = null;
        long generation = 0;
        long[] defaults = null;
        Map<String, long[]> users = new HashMap<>();
        Map<Integer, String> uids = new HashMap<>();
        Map<String, String> connections = new HashMap<>();
        try {
            if (words.length != 2) {
                throw new IllegalArgumentException("APPLY takes one generation number");
            }
            generation = Wire.rate(words[1]);
        } catch (IllegalArgumentException e) {
            error = e.getMessage();
        }
        int count = 0;
        String line;
        while ((line = in.readLine()) != null && !line.equals("END")) {
            if (error != null) {
                continue;  // keep reading to END, so the session stays in step
            }
            try {
                if (++count > MAX_LINES || line.length() > MAX_LINE) {
                    throw new IllegalArgumentException("APPLY too large");
                }
                String[] f = line.split(" ");
                switch (f[0]) {
                    case "DEFAULT" -> {
                        expect(f, 3);
                        defaults = new long[] {Wire.rate(f[1]), Wire.rate(f[2])};
                    }
                    case "USER" -> {
                        expect(f, 4);
                        users.put(Wire.user(f[1]), new long[] {Wire.rate(f[2]), Wire.rate(f[3])});
                    }
                    case "UID" -> {
                        expect(f, 3);
                        uids.put(Wire.uid(f[1]), Wire.user(f[2]));
                    }
                    case "CONN" -> {
                        expect(f, 4);
                        connections.put(Wire.ip(f[1]) + " " + Wire.port(f[2]), Wire.user(f[3]));
                    }
                    default -> throw new IllegalArgumentException("unknown line '" + clip(f[0]) + "'");
                }
            } catch (IllegalArgumentException e) {
                error = e.getMessage();
            }
        }
        if (line == null) {
            return "ERR APPLY ended before END\n";
        }
        if (error == null && defaults == null) {
            error = "APPLY needs a DEFAULT line";
        }
        if (error != null) {
            return "ERR " + error + "; nothing changed\n";
        }
        Registry.apply(new Registry.Rates(generation, defaults[0], defaults[1], users, uids, connections));
        return "OK " + generation + "\n";
    }

    private static void expect(String[] fields, int count) {
        if (fields.length != count) {
            throw new IllegalArgumentException(fields[0] + " takes " + (count - 1) + " values, got " + (fields.length - 1));
        }
    }

    private static String clip(String text) {
        String printable = text.replaceAll("[^\\x20-\\x7e]", "?");
        return printable.length() > 40 ? printable.substring(0, 40) + "..." : printable;
    }
}
