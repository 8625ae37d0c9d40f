package org.vnodesync.dnthrottle;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.net.ProtocolFamily;
import java.net.SocketAddress;
import java.net.StandardProtocolFamily;
import java.nio.channels.Channels;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;

/** The JDK's own Unix-domain socket (Java 16 and later), by reflection: the agent is compiled for Java 8. */
final class JdkUnixListener implements UnixListener {
    private static final ProtocolFamily UNIX = unixFamily();

    private final ServerSocketChannel server;

    private JdkUnixListener(ServerSocketChannel server) {
        this.server = server;
    }

    /** Whether this JVM has StandardProtocolFamily.UNIX and UnixDomainSocketAddress (16 and later). */
    static boolean supported() {
        return UNIX != null;
    }

    static ProtocolFamily family() {
        return UNIX;
    }

    private static ProtocolFamily unixFamily() {
        try {
            ProtocolFamily unix = StandardProtocolFamily.valueOf("UNIX");
            Class.forName("java.net.UnixDomainSocketAddress");
            return unix;
        } catch (IllegalArgumentException | ClassNotFoundException e) {
            return null;
        }
    }

    /** UnixDomainSocketAddress.of(PATH). */
    static SocketAddress address(Path path) throws IOException {
        try {
            return (SocketAddress) invoke(Class.forName("java.net.UnixDomainSocketAddress"), "of", Path.class, path);
        } catch (ClassNotFoundException e) {
            throw new IOException("no Unix-domain socket addresses in this JVM", e);
        }
    }

    static JdkUnixListener open(Path socket) throws IOException {
        ServerSocketChannel server = (ServerSocketChannel) invoke(ServerSocketChannel.class, "open",
                ProtocolFamily.class, UNIX);
        try {
            server.bind(address(socket));
        } catch (IOException | RuntimeException e) {
            server.close();
            throw e;
        }
        return new JdkUnixListener(server);
    }

    /** A static method of ON taking one PARAMETER, its IOException passed on as itself. */
    static Object invoke(Class<?> on, String name, Class<?> parameter, Object argument) throws IOException {
        try {
            Method method = on.getMethod(name, parameter);
            return method.invoke(null, argument);
        } catch (InvocationTargetException e) {
            if (e.getCause() instanceof IOException) {
                throw (IOException) e.getCause();
            }
            throw new IOException(on.getName() + "." + name + " failed", e.getCause());
        } catch (ReflectiveOperationException e) {
            throw new IOException(on.getName() + "." + name + " is not in this JVM", e);
        }
    }

    @Override
    public Connection accept() throws IOException {
        final SocketChannel channel = server.accept();
        final InputStream in = Channels.newInputStream(channel);
        final OutputStream out = Channels.newOutputStream(channel);
        return new Connection() {
            @Override
            public InputStream input() {
                return in;
            }

            @Override
            public OutputStream output() {
                return out;
            }

            @Override
            public void close() throws IOException {
                channel.close();
            }
        };
    }

    @Override
    public boolean isOpen() {
        return server.isOpen();
    }

    @Override
    public void close() throws IOException {
        server.close();
    }
}
