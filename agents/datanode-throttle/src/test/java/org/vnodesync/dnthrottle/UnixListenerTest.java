package org.vnodesync.dnthrottle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ProtocolFamily;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collections;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Both ways the control socket is made: the JDK's (Java 16 and later) and libc's through JNA (the Java 8
 * and 11 that DataNodes run on), each against a real peer: the JDK's client socket, so this runs on 16+.
 */
class UnixListenerTest {
    private static UnixListener open(String kind, Path socket) throws IOException {
        return kind.equals("jdk") ? JdkUnixListener.open(socket) : LibcUnixListener.open(socket);
    }

    private static SocketChannel connect(Path socket) throws Exception {
        SocketChannel channel = (SocketChannel) SocketChannel.class.getMethod("open", ProtocolFamily.class)
                .invoke(null, JdkUnixListener.family());
        channel.connect(JdkUnixListener.address(socket));
        return channel;
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"jdk", "libc"})
    void aPeerGetsTheReplyToItsRequestWhateverTheSizeAndSeesTheCloseAsEndOfStream(String kind, @TempDir Path dir)
            throws Exception {
        assumeTrue(JdkUnixListener.supported(), "the test's client needs Java 16+");
        Path path = dir.resolve("throttle.sock");
        String big = String.join("", Collections.nCopies(100_000, "x"));  // more than one native buffer
        try (UnixListener listener = open(kind, path)) {
            assertTrue(Files.exists(path));
            CompletableFuture<String> served = CompletableFuture.supplyAsync(() -> {
                try (UnixListener.Connection connection = listener.accept()) {
                    String request = Protocol.readLine(connection.input());
                    OutputStream out = connection.output();
                    out.write(("OK " + request.length() + " " + big + "\n").getBytes(StandardCharsets.UTF_8));
                    out.flush();
                    return request;
                } catch (IOException e) {
                    throw new RuntimeException(e);
                }
            });
            try (SocketChannel client = connect(path)) {
                client.write(ByteBuffer.wrap("PING\n".getBytes(StandardCharsets.UTF_8)));
                InputStream in = Channels.newInputStream(client);
                byte[] reply = readAll(in);
                assertEquals("OK 4 " + big + "\n", new String(reply, StandardCharsets.UTF_8));
            }
            assertEquals("PING", served.get(10, TimeUnit.SECONDS));
        }
    }

    private static byte[] readAll(InputStream in) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] chunk = new byte[4096];
        int n;
        while ((n = in.read(chunk)) > 0) {
            out.write(chunk, 0, n);
        }
        return out.toByteArray();
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"jdk", "libc"})
    void closingTheListenerWakesAThreadWaitingToAcceptAndItIsClosedForGood(String kind, @TempDir Path dir)
            throws Exception {
        assumeTrue(kind.equals("libc") || JdkUnixListener.supported(), "the JDK's needs Java 16+");
        UnixListener listener = open(kind, dir.resolve("throttle.sock"));
        CompletableFuture<Throwable> waiting = CompletableFuture.supplyAsync(() -> {
            try {
                listener.accept().close();
                return null;
            } catch (Throwable e) {
                return e;
            }
        });
        Thread.sleep(200);
        listener.close();
        assertTrue(waiting.get(10, TimeUnit.SECONDS) instanceof IOException);
        assertFalse(listener.isOpen());
        assertThrows(IOException.class, listener::accept);
    }

    @Test
    void aPathTooLongForSockaddrUnIsRefusedInOneLineAndNothingIsMade(@TempDir Path dir) {
        Path path = dir.resolve(String.join("", Collections.nCopies(LibcUnixListener.SUN_PATH, "s")));
        IOException e = assertThrows(IOException.class, () -> LibcUnixListener.open(path));
        assertTrue(e.getMessage().contains("must be under 108"), e.getMessage());
        assertFalse(Files.exists(path));
    }
}
