package org.vnodesync.dnthrottle;

import com.sun.jna.LastErrorException;
import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.Pointer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ClosedChannelException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

/**
 * A Unix-domain stream socket from libc (socket, bind, listen, accept4, recv, send), through JNA's
 * direct mapping: for JVMs before 16, which have none of their own. Linux only (sockaddr_un's layout,
 * SOCK_CLOEXEC, MSG_NOSIGNAL), as the rest of the agent (sock_diag, /proc).
 */
final class LibcUnixListener implements UnixListener {
    private static final int AF_UNIX = 1;
    private static final int SOCK_STREAM = 1;
    private static final int SOCK_CLOEXEC = 0x80000;
    private static final int MSG_NOSIGNAL = 0x4000;   // a peer gone is an error, not SIGPIPE in the DataNode
    private static final int SHUT_RDWR = 2;
    private static final int EINTR = 4;
    /** sizeof(sockaddr_un.sun_path) on Linux: the path and its NUL. */
    static final int SUN_PATH = 108;
    private static final int BACKLOG = 16;
    private static final int CHUNK = 8192;

    /** libc, bound once by JNA's direct mapping; each call that fails throws with its errno. */
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

        static native int socket(int domain, int type, int protocol) throws LastErrorException;

        static native int bind(int fd, byte[] address, int length) throws LastErrorException;

        static native int listen(int fd, int backlog) throws LastErrorException;

        static native int accept4(int fd, Pointer address, Pointer length, int flags) throws LastErrorException;

        static native long recv(int fd, Pointer buffer, long length, int flags) throws LastErrorException;

        static native long send(int fd, Pointer buffer, long length, int flags) throws LastErrorException;

        static native int shutdown(int fd, int how) throws LastErrorException;

        static native int close(int fd) throws LastErrorException;
    }

    private final int fd;
    private volatile boolean open = true;

    private LibcUnixListener(int fd) {
        this.fd = fd;
    }

    static LibcUnixListener open(Path socket) throws IOException {
        if (LibC.FAILURE != null) {
            throw new IOException("no Unix-domain sockets on Java " + System.getProperty("java.version")
                    + " without JNA, which did not load: " + LibC.FAILURE, LibC.FAILURE);
        }
        byte[] address = address(socket);
        int fd;
        try {
            fd = LibC.socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        } catch (LastErrorException e) {
            throw failed("socket", socket, e);
        }
        try {
            LibC.bind(fd, address, address.length);
            LibC.listen(fd, BACKLOG);
        } catch (LastErrorException e) {
            closeQuietly(fd);
            throw failed("bind", socket, e);
        }
        return new LibcUnixListener(fd);
    }

    /** struct sockaddr_un for PATH: sun_family, then the path and its NUL; refused if it does not fit. */
    static byte[] address(Path socket) throws IOException {
        byte[] path = socket.toString().getBytes(StandardCharsets.UTF_8);
        if (path.length >= SUN_PATH) {
            throw new IOException("socket path " + socket + " is " + path.length + " bytes; a Unix-domain socket's"
                    + " path must be under " + SUN_PATH);
        }
        ByteBuffer out = ByteBuffer.allocate(2 + path.length + 1).order(ByteOrder.nativeOrder());
        out.putShort((short) AF_UNIX).put(path).put((byte) 0);
        return out.array();
    }

    private static IOException failed(String call, Path socket, LastErrorException e) {
        return new IOException(call + " " + socket + ": " + e.getMessage(), e);
    }

    private static void closeQuietly(int fd) {
        try {
            LibC.close(fd);
        } catch (LastErrorException ignored) {
            // nothing more can be done with it
        }
    }

    @Override
    public Connection accept() throws IOException {
        while (open) {
            try {
                return new LibcConnection(LibC.accept4(fd, null, null, SOCK_CLOEXEC));
            } catch (LastErrorException e) {
                if (!open) {
                    break;
                }
                if (e.getErrorCode() != EINTR) {
                    throw new IOException("accept: " + e.getMessage(), e);
                }
            }
        }
        throw new ClosedChannelException();
    }

    @Override
    public boolean isOpen() {
        return open;
    }

    /** Wakes a thread blocked in accept (shutdown makes it fail with EINVAL), then closes the socket. */
    @Override
    public void close() {
        if (!open) {
            return;
        }
        open = false;
        try {
            LibC.shutdown(fd, SHUT_RDWR);
        } catch (LastErrorException ignored) {
            // not listening any more anyway
        }
        closeQuietly(fd);
    }

    /** One accepted connection's file descriptor, as a pair of streams, each through its own native buffer. */
    private static final class LibcConnection implements Connection {
        private final int fd;
        private final Memory received = new Memory(CHUNK);
        private final Memory sending = new Memory(CHUNK);
        private volatile boolean open = true;
        private final InputStream input = new InputStream() {
            @Override
            public int read() throws IOException {
                byte[] one = new byte[1];
                return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
            }

            @Override
            public int read(byte[] b, int off, int len) throws IOException {
                return len == 0 ? 0 : receive(b, off, len);
            }
        };
        private final OutputStream output = new OutputStream() {
            @Override
            public void write(int b) throws IOException {
                write(new byte[] {(byte) b}, 0, 1);
            }

            @Override
            public void write(byte[] b, int off, int len) throws IOException {
                send(b, off, len);
            }
        };

        LibcConnection(int fd) {
            this.fd = fd;
        }

        /** Up to LEN bytes into B at OFF; -1 once the peer has closed its end. */
        private int receive(byte[] b, int off, int len) throws IOException {
            synchronized (received) {
                while (true) {
                    try {
                        int n = (int) LibC.recv(fd, received, Math.min(len, CHUNK), 0);
                        if (n == 0) {
                            return -1;
                        }
                        received.read(0, b, off, n);
                        return n;
                    } catch (LastErrorException e) {
                        if (e.getErrorCode() != EINTR) {
                            throw new IOException("recv: " + e.getMessage(), e);
                        }
                    }
                }
            }
        }

        /** All LEN bytes of B from OFF, a chunk at a time, each sent whole however the kernel splits it. */
        private void send(byte[] b, int off, int len) throws IOException {
            synchronized (sending) {
                while (len > 0) {
                    int chunk = Math.min(len, CHUNK);
                    sending.write(0, b, off, chunk);
                    long sent = 0;
                    while (sent < chunk) {
                        try {
                            sent += LibC.send(fd, sending.share(sent), chunk - sent, MSG_NOSIGNAL);
                        } catch (LastErrorException e) {
                            if (e.getErrorCode() != EINTR) {
                                throw new IOException("send: " + e.getMessage(), e);
                            }
                        }
                    }
                    off += chunk;
                    len -= chunk;
                }
            }
        }

        @Override
        public InputStream input() {
            return input;
        }

        @Override
        public OutputStream output() {
            return output;
        }

        @Override
        public void close() {
            if (open) {
                open = false;
                closeQuietly(fd);
            }
        }
    }
}
