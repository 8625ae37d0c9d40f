package org.vnodesync.dnthrottle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;

/** Against this host's kernel: the owner of a real connection, by its 4-tuple, agrees with /proc/net/tcp. */
class SockDiagTest {
    @Test
    void theKernelNamesTheOwnerOfAConnectionByItsFourTuple() throws Exception {
        assumeTrue(Files.exists(Paths.get("/proc/self/net/tcp")), "needs Linux");
        assertNull(SockDiag.unavailable());
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
             Socket client = new Socket(InetAddress.getLoopbackAddress(), server.getLocalPort());
             Socket accepted = server.accept()) {
            Policy.Endpoint clientEnd = new Policy.Endpoint(client.getLocalAddress(), client.getLocalPort());
            Policy.Endpoint serverEnd = new Policy.Endpoint(accepted.getLocalAddress(), accepted.getLocalPort());
            // /proc/self belongs to this process's uid (UnixSystem is not in Java 8's public API).
            long me = ((Number) Files.getAttribute(Paths.get("/proc/self"), "unix:uid")).longValue();
            assertEquals(OptionalLong.of(me), new SockDiag().ownerOf(clientEnd, serverEnd));
            assertEquals(new SocketOwners(Paths.get("/proc/self/net")).ownerOf(clientEnd, serverEnd),
                    new SockDiag().ownerOf(clientEnd, serverEnd));
            // The same 4-tuple seen from the other side is the server's socket; a port nobody uses, nothing.
            assertEquals(OptionalLong.of(me), new SockDiag().ownerOf(serverEnd, clientEnd));
            Policy.Endpoint nobody = new Policy.Endpoint(client.getLocalAddress(), 1);
            assertEquals(OptionalLong.empty(), new SockDiag().ownerOf(nobody, serverEnd));
        }
    }
}
