package org.vnodesync.dnthrottle;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;

/**
 * The Unix-domain socket the storage agent talks to. Only the DataNode's user (and root) may connect:
 * the parent directory is 0700 and the socket 0600. Served by daemon threads, one per connection.
 */
final class ControlServer {
    private final Path socket;
    private final Throttles throttles;
    private final Protocol.Environment environment;
    private UnixListener server;

    ControlServer(Path socket, Throttles throttles, Protocol.Environment environment) {
        this.socket = socket;
        this.throttles = throttles;
        this.environment = environment;
    }

    void start() throws IOException {
        Path dir = socket.toAbsolutePath().getParent();
        if (!Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)) {
            Files.createDirectories(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        }
        Set<PosixFilePermission> dirMode = Files.getPosixFilePermissions(dir);
        if (!PosixFilePermissions.toString(dirMode).endsWith("------")) {
            // Not ours to chmod (it may be /tmp); the socket's own 0600 still keeps others out.
            AgentLog.warn("control socket directory " + dir + " is " + PosixFilePermissions.toString(dirMode)
                    + ", not rwx------");
        }
        Files.deleteIfExists(socket);  // a stale socket from an earlier DataNode
        server = UnixListener.open(socket);
        Files.setPosixFilePermissions(socket, PosixFilePermissions.fromString("rw-------"));
        Thread acceptor = new Thread(this::acceptLoop, "vnode-sync-throttle-control");
        acceptor.setDaemon(true);
        acceptor.start();
    }

    private void acceptLoop() {
        while (server.isOpen()) {
            try {
                UnixListener.Connection connection = server.accept();
                Thread handler = new Thread(() -> serve(connection), "vnode-sync-throttle-conn");
                handler.setDaemon(true);
                handler.start();
            } catch (IOException e) {
                if (!server.isOpen()) {
                    return;
                }
                AgentLog.once("accept", "control socket accept failed", e);
            } catch (Throwable e) {
                AgentLog.once("accept-loop", "control socket stopped", e);
                return;
            }
        }
    }

    private void serve(UnixListener.Connection connection) {
        try (UnixListener.Connection open = connection) {
            InputStream in = new BufferedInputStream(open.input());
            OutputStream out = new BufferedOutputStream(open.output());
            new Protocol(throttles, environment).serve(in, out);
        } catch (IOException e) {
            // the storage agent hung up; nothing to do
        } catch (Throwable e) {
            AgentLog.once("serve", "control connection failed", e);
        }
    }

    void close() throws IOException {
        if (server != null) {
            server.close();
        }
        Files.deleteIfExists(socket);
    }
}
