package org.vnodesync.dnthrottle;

import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Path;

/**
 * A listening Unix-domain stream socket. The JDK has one from Java 16 on (JEP 380), reached by
 * reflection because the agent is built for Java 8; the JVMs Hadoop 3.3 and 3.4 support (8 and 11) get
 * libc's, through JNA.
 */
interface UnixListener extends Closeable {
    /** One accepted connection; closing it closes both streams. */
    interface Connection extends Closeable {
        InputStream input();

        OutputStream output();
    }

    /** Blocks until a peer connects; throws once the listener is closed. */
    Connection accept() throws IOException;

    boolean isOpen();

    /** Listens on SOCKET (which must not exist yet): with the JDK's own socket where it has one, else libc's. */
    static UnixListener open(Path socket) throws IOException {
        if (JdkUnixListener.supported()) {
            return JdkUnixListener.open(socket);
        }
        return LibcUnixListener.open(socket);
    }
}
