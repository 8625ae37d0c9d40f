package org.vnodesync.dnthrottle;

import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.LockSupport;

/**
 * One read op's read-ahead through its volume's dispatcher (docs/edge.md, A4 and section 8). A DataNode
 * with Hadoop's native library reads ahead of each reader: before each packet, BlockSender asks
 * ReadaheadPool.readaheadStream, which, each time the reader passes the halfway mark of its last
 * request, cancels it and submits a new one (the read-ahead's length from the reader's position) to a
 * pool thread that asks the kernel for it (posix_fadvise WILLNEED). Those requests are the disk's real
 * queue for reads; the packets then mostly copy from the page cache.
 *
 * <p>So here a request's disk read is what takes the slots: its pool thread reads the bytes earlier
 * requests did not cover in pieces of PIECE_BYTES, each a slot at the op's volume under its user's
 * weight (tagged with its bytes, as a packet is), from its WILLNEED until its last byte is in the page
 * cache (a one-byte read there waits for the kernel's read of it: fadvise itself returns once the read
 * is queued). A request the reader replaced before its pool thread asked the disk for the rest gives
 * that rest up uncharged (Dispatcher.cancel), and the next covers it. The op's packets take no slot
 * once its first request is made: each waits only until the read-ahead has asked the disk for its
 * first byte, so that a reader never reads past its read-ahead on its own (the kernel's read, unordered).
 *
 * <p>Made on the op's thread; its requests run on the pool's threads. One lock, the object's own.
 */
final class ReadAhead {
    /** A read-ahead asks the disk for this much per slot: a packet's worth, so it weighs what the packets it stands for did. */
    static final long PIECE_BYTES = Dispatcher.FIRST_PACKET_BYTES;

    /** The requests made and not run yet, by file descriptor and offset: what a pool thread looks its request up by. */
    private static final Map<Key, Request> MADE = new ConcurrentHashMap<>();

    private final Dispatcher dispatcher;
    private final Flow flow;
    private final UserShare share;
    private final Thread opThread;
    private final UserThrottler.Clock clock;
    private long coveredTo;              // what its requests asked, or will ask, the disk for up to
    private volatile long askedTo;       // the disk was asked for everything of the block before this
    private int unfinished;              // requests made and not yet done (run, or cancelled before)
    private Request current;
    private FileChannel channel;         // the block file, for the one-byte reads (never closed here: the op's)

    ReadAhead(Dispatcher dispatcher, Flow flow, UserShare share, Thread opThread, UserThrottler.Clock clock) {
        this.dispatcher = dispatcher;
        this.flow = flow;
        this.share = share;
        this.opThread = opThread;
        this.clock = clock;
    }

    /** What a pool thread's request finds: an identity, as Hadoop's request is one object per submission. */
    private static final class Key {
        final FileDescriptor fd;
        final long offset;

        Key(FileDescriptor fd, long offset) {
            this.fd = fd;
            this.offset = offset;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Key && ((Key) o).fd == fd && ((Key) o).offset == offset;
        }

        @Override
        public int hashCode() {
            return System.identityHashCode(fd) * 31 + Long.hashCode(offset);
        }
    }

    /** One request of the op's: its range, and how far its pool thread got. */
    static final class Request {
        final ReadAhead op;
        final Key key;
        final long length;
        boolean cancelled;
        boolean started;
        long dispatchedTo;            // its pieces dispatched so far cover up to this
        Dispatcher.Ticket ticket;     // its pool thread's place at the volume (null: not started)

        Request(ReadAhead op, Key key, long length) {
            this.op = op;
            this.key = key;
            this.length = length;
        }
    }

    /**
     * On the op's thread, before readaheadStream runs at POSITION with the read-ahead's LENGTH and its
     * LAST request: if it will submit a new one (the halfway mark passed, or none yet), the last is cancelled
     * (readaheadStream does the same to Hadoop's) and the new one is made known for its pool thread.
     */
    void beforeStream(FileDescriptor fd, long position, long length, Object last) {
        if (length <= 0 || fd == null) {
            return;
        }
        long lastOffset = last instanceof org.apache.hadoop.io.ReadaheadPool.ReadaheadRequest
                ? ((org.apache.hadoop.io.ReadaheadPool.ReadaheadRequest) last).getOffset() : Long.MIN_VALUE;
        if (last != null && position < lastOffset + length / 2) {
            return;
        }
        cancelCurrent();
        Request made = new Request(this, new Key(fd, position), length);
        synchronized (this) {
            current = made;
            unfinished++;
        }
        MADE.put(made.key, made);
    }

    /**
     * On the op's thread, after readaheadStream at POSITION: if it made no request after all, the one made
     * known is dropped. Then the packet about to be read there waits until the disk was asked for its first
     * byte, while a request of the op's may still ask for it; CANCELLED: its op is being cancelled.
     */
    void afterStream(long position, boolean submitted, java.util.function.BooleanSupplier cancelled) {
        Request made;
        synchronized (this) {
            made = current;
        }
        if (!submitted && made != null && made.key.offset == position && MADE.remove(made.key) != null) {
            finished(made);
        }
        while (askedTo <= position) {
            synchronized (this) {
                if (unfinished == 0 || askedTo > position) {
                    return;
                }
            }
            if (cancelled.getAsBoolean() || Thread.currentThread().isInterrupted()) {
                return;
            }
            LockSupport.parkNanos(this, Dispatcher.PATIENCE_NS);
        }
    }

    /** The op's last request, if its pool thread has not asked the disk for all of it, asks for no more. */
    void cancelCurrent() {
        Request last;
        Dispatcher.Ticket waiting;
        synchronized (this) {
            last = current;
            current = null;
            if (last == null || last.cancelled) {
                return;
            }
            last.cancelled = true;
            if (last.started) {
                coveredTo = last.dispatchedTo;   // the rest is the next request's
            }
            waiting = last.ticket;
        }
        if (!last.started && MADE.remove(last.key) != null) {
            finished(last);   // never run: Hadoop's own run returns at once, cancelled
        }
        if (waiting != null) {
            dispatcher.cancel(waiting, clock.nanoTime());
        }
    }

    /** Run on a pool thread in place of Hadoop's ReadaheadRequestImpl.run; false: not an op's request here. */
    static boolean run(FileDescriptor fd, long offset, String identifier) {
        Request request = MADE.remove(new Key(fd, offset));
        if (request == null) {
            return false;
        }
        request.op.read(request, fd, identifier);
        return true;
    }

    private void read(Request request, FileDescriptor fd, String identifier) {
        long from;
        long end;
        try {
            synchronized (this) {
                if (request.cancelled) {
                    return;
                }
                if (channel == null) {
                    // Shares the op's descriptor and is never closed here: it closes with the op's stream.
                    // (An interrupt during its read would close both; nothing interrupts the pool's threads
                    // while they run a request: ThreadPoolExecutor interrupts idle ones only, short of shutdownNow.)
                    channel = new FileInputStream(fd).getChannel();
                }
            }
            long size = channel.size();
            synchronized (this) {
                if (request.cancelled) {
                    return;
                }
                request.started = true;
                request.ticket = new Dispatcher.Ticket(flow, Direction.READ, Thread.currentThread());
                from = Math.max(request.key.offset, coveredTo);
                end = Math.min(request.key.offset + request.length, size);
                request.dispatchedTo = from;
                coveredTo = Math.max(coveredTo, end);
            }
            readPieces(request, fd, identifier, from, end);
        } catch (java.nio.channels.ClosedChannelException e) {
            // the op ended and closed its block file while a piece was being read: nothing is left to read
        } catch (IOException | RuntimeException e) {
            AgentLog.once("read-ahead", "a read-ahead through the dispatcher failed; the op's reads go on", e);
        } finally {
            finished(request);
        }
    }

    private void readPieces(Request request, FileDescriptor fd, String identifier, long from, long end)
            throws IOException {
        Dispatcher.Ticket ticket = request.ticket;
        ByteBuffer one = ByteBuffer.allocate(1);
        long done = 0;
        try {
            for (long at = from; at < end; at += done) {
                long piece = Math.min(PIECE_BYTES, end - at);
                double weight = share.weight;
                if (weight <= 0) {
                    // No weights: the rest at once, as Hadoop asks for it, and nothing to wait for.
                    willNeed(identifier, fd, at, end - at);
                    return;
                }
                long now = clock.nanoTime();
                boolean reserved = !share.floor.unlimited() && share.floor.tryTake(piece, now);
                if (!dispatcher.ask(ticket, done, piece, weight, reserved, now)) {
                    dispatcher.await(ticket, clock, () -> false);
                }
                done = 0;
                synchronized (this) {
                    if (request.cancelled) {
                        return;
                    }
                    request.dispatchedTo = at + piece;
                }
                willNeed(identifier, fd, at, piece);
                one.clear();
                channel.read(one, at + piece - 1);   // waits for the kernel's read of the piece's last page
                done = piece;
            }
        } finally {
            dispatcher.release(ticket, done, clock.nanoTime());
        }
    }

    /** Hadoop's own call (ReadaheadRequestImpl.run): the kernel queues the read of LENGTH bytes at OFFSET. */
    private void willNeed(String identifier, FileDescriptor fd, long offset, long length) throws IOException {
        org.apache.hadoop.io.nativeio.NativeIO.POSIX.getCacheManipulator().posixFadviseIfPossible(identifier, fd,
                offset, length, org.apache.hadoop.io.nativeio.NativeIO.POSIX.POSIX_FADV_WILLNEED);
        asked(offset + length);
    }

    private void asked(long to) {
        synchronized (this) {
            if (to <= askedTo) {
                return;   // an older request's last piece, after the next request's first
            }
            askedTo = to;
        }
        LockSupport.unpark(opThread);
    }

    private void finished(Request request) {
        synchronized (this) {
            unfinished--;
        }
        LockSupport.unpark(opThread);
    }

    /** The disk was asked for everything of the block before this (tests). */
    long askedTo() {
        return askedTo;
    }

    /** Requests made known and not yet run, on every op (tests). */
    static int made() {
        return MADE.size();
    }
}
