package org.vnodesync.dnthrottle;

import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.util.ArrayDeque;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.LockSupport;

/**
 * One read op's read-ahead through its volume's dispatcher (docs/edge.md, section 1 item 5, and A4). A
 * DataNode with Hadoop's native library reads ahead of each reader: before each packet, BlockSender asks
 * ReadaheadPool.readaheadStream, which, each time the reader passes the halfway mark of its last
 * request, submits a new one (the read-ahead's length from the reader's position) to a pool thread that
 * asks the kernel for it (posix_fadvise WILLNEED). Those requests are the disk's real queue for reads;
 * the packets then mostly copy from the page cache.
 *
 * <p>So here the op's read-ahead is what takes the volume's slots. Each request only moves the end of what
 * the op wants read ahead; one pool thread at a time (the first request's to run, while there is more to
 * read) reads it in pieces (Dispatcher.pieceBytes: a packet's worth where others move at the volume, a
 * slice of the volume's time while its user is alone there), each a slot at the op's volume under its
 * user's weight and tagged with its bytes, as the packets of a thread are: with nothing of the op at the
 * disk, a piece competes for the slot its last piece frees; the next piece, queued at the disk behind the
 * one being read (IN_FLIGHT), only takes a slot nobody waits for (Dispatcher.offer). A piece holds its
 * slot from its WILLNEED until its last byte is in the page cache (a one-byte read there waits for the
 * kernel's read of it: fadvise itself returns once the read is queued). The other requests' runs are
 * skipped. The op's packets then wait, holding no slot, until their bytes were read (readTo), and take
 * slots of their own for their copy and send (UserThrottler, the volume's packets' dispatcher).
 *
 * <p>A piece the disk read faster than the volume's packets are copied and sent (diskBinds: the page
 * cache's, whose one-byte read returns at once, the plainest case) says that the packets' queue, not the
 * disk's, is where this op's reads wait: its next pieces take no slot and are charged nothing at the
 * disk, each sized as an ordered one (a packet's worth where others move at the volume), until one the
 * disk reads slower than that puts it back through the slots. A user alone at the volume has nobody to be
 * ordered against: its pieces take slots, which do not bound it, two at the disk as ra58b's.
 *
 * <p>Made on the op's thread; read on the pool's. One lock, the object's own.
 */
final class ReadAhead {
    /**
     * An op's pieces at the disk at once: the one being read and the next, queued behind it, so that the
     * disk does not wait for the hand-off between them (double buffering). The second only takes a slot
     * nobody waits for (Dispatcher.offer), so where users share a volume the depth bounds them as before.
     */
    static final int IN_FLIGHT = 2;

    /** Requests made and not run yet, by file descriptor and offset: what a pool thread finds its op by. */
    private static final Map<Key, ReadAhead> MADE = new ConcurrentHashMap<>();

    private final Dispatcher dispatcher;
    private final Dispatcher packets;    // the volume's packets' copy and send: what a piece's disk time is set against
    private final Flow flow;
    private final UserShare share;
    private final Thread opThread;
    private final UserThrottler.Clock clock;
    private long wantedTo;               // the end of its last request: what it wants read ahead up to
    private long dispatchedTo;           // its pieces dispatched so far cover up to this
    private volatile long askedTo;       // the disk was asked for everything of the block before this
    private volatile long readTo;        // ...and has read it into the page cache
    private int unrun;                   // requests made and not yet run (nor dropped)
    private Slot[] readers;              // the tickets of the pool thread reading its pieces (null: none)
    private boolean ended;
    private FileChannel channel;         // the block file, for the one-byte reads (never closed here: the op's)
    // Its pieces' mean size and mean time at the disk (Dispatcher.SMOOTHING): what diskBinds weighs. Its
    // reader's alone (one at a time).
    private double diskBytes;
    private double diskNs;

    /** An op of FLOW's at DISPATCHER, its volume, whose read packets take the slots of PACKETS. */
    ReadAhead(Dispatcher dispatcher, Flow flow, UserShare share, Thread opThread, UserThrottler.Clock clock,
              Dispatcher packets) {
        this.dispatcher = dispatcher;
        this.packets = packets;
        this.flow = flow;
        this.share = share;
        this.opThread = opThread;
        this.clock = clock;
    }

    /** What a pool thread's request is found by: Hadoop makes one object per request, of a descriptor and an offset. */
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

    /**
     * On the op's thread, before readaheadStream runs at POSITION with the read-ahead's LENGTH and its
     * LAST request: if it will submit a new one (none yet, or the halfway mark of the last passed), the op
     * wants LENGTH read ahead from POSITION, and the request is made known for its pool thread.
     */
    void beforeStream(FileDescriptor fd, long position, long length, Object last) {
        if (length <= 0 || fd == null) {
            return;
        }
        if (last instanceof org.apache.hadoop.io.ReadaheadPool.ReadaheadRequest
                && position < ((org.apache.hadoop.io.ReadaheadPool.ReadaheadRequest) last).getOffset() + length / 2) {
            return;
        }
        synchronized (this) {
            if (ended) {
                return;
            }
            wantedTo = Math.max(wantedTo, position + length);
            dispatchedTo = Math.max(dispatchedTo, position);   // an op that starts inside its block reads ahead from there
            unrun++;
        }
        MADE.put(new Key(fd, position), this);
    }

    /**
     * On the op's thread, after readaheadStream at POSITION: if it submitted no request after all, the one
     * made known is dropped. Then the packet about to be read there waits until its first byte was read,
     * while the op's read-ahead may still read it; before it waits it runs GIVE_UP (its packets' slot is
     * not held for a wait at the disk). CANCELLED: its op is being cancelled. Returns whether it waited.
     */
    boolean afterStream(FileDescriptor fd, long position, boolean submitted,
                        java.util.function.BooleanSupplier cancelled, Runnable giveUp) {
        if (!submitted && fd != null && MADE.remove(new Key(fd, position), this)) {
            synchronized (this) {
                unrun--;
            }
        }
        boolean waited = false;
        while (readTo <= position) {
            synchronized (this) {
                if (readTo > position || unrun == 0 && readers == null) {
                    return waited;
                }
            }
            if (cancelled.getAsBoolean() || Thread.currentThread().isInterrupted()) {
                return waited;
            }
            if (!waited) {
                giveUp.run();
                waited = true;
            }
            LockSupport.parkNanos(this, Dispatcher.PATIENCE_NS);
        }
        return waited;
    }

    /** The op ended (BlockSender.close cancels its read-ahead too): its reader asks for no more. */
    void end() {
        Slot[] waiting;
        synchronized (this) {
            ended = true;
            waiting = readers;
        }
        if (waiting != null) {
            for (Slot slot : waiting) {
                dispatcher.cancel(slot.ticket, clock.nanoTime());   // a piece waiting for its slot leaves, uncharged
            }
        }
    }

    /**
     * Run on a pool thread in place of Hadoop's ReadaheadRequestImpl.run for the request at OFFSET of FD:
     * false if it is not an op's (Hadoop's own run goes on).
     */
    static boolean run(FileDescriptor fd, long offset, String identifier) {
        ReadAhead op = MADE.remove(new Key(fd, offset));
        if (op == null) {
            return false;
        }
        op.read(fd, identifier);
        return true;
    }

    /** One of the reader's two tickets, and the piece it asked for last. */
    private static final class Slot {
        final Dispatcher.Ticket ticket;
        long end;       // its piece covers the block up to this
        long bytes;     // its piece's size
        long askedNs;   // when the disk was asked for it
        long done;      // bytes of its piece read and not yet counted at the volume (its next ask, offer or release counts them)

        Slot(Dispatcher.Ticket ticket) {
            this.ticket = ticket;
        }
    }

    /**
     * Reads the op's pieces while there are more it wants, unless another pool thread already does: the
     * piece being read and, where a slot is free (or its user is alone), the next one, queued behind it at
     * the disk (IN_FLIGHT); or, while the disk outpaces the op's packets (diskBinds) and another user moves at
     * the volume, one at a time with no slot (alone, its pieces go at once anyway, and two keep the disk busy).
     */
    private void read(FileDescriptor fd, String identifier) {
        Slot[] slots = {new Slot(Dispatcher.Ticket.piece(flow, Thread.currentThread())),
                new Slot(Dispatcher.Ticket.piece(flow, Thread.currentThread()))};
        synchronized (this) {
            unrun--;
            if (readers != null || ended) {
                return;   // its reader goes on to what this request wants; an ended op wants nothing
            }
            readers = slots;
        }
        ArrayDeque<Slot> atDisk = new ArrayDeque<>(IN_FLIGHT);
        try {
            FileChannel block = channel(fd);
            long size = block.size();
            ByteBuffer one = ByteBuffer.allocate(1);
            boolean diskBinds = true;   // until a piece says otherwise
            long lastReadNs = 0;
            while (true) {
                // Alone, nobody to order it against: its pieces go at once, two at the disk.
                boolean ordered = diskBinds || dispatcher.isAlone(flow);
                if (atDisk.isEmpty() && !ordered) {
                    for (Slot slot : slots) {   // no slot is held for unordered pieces
                        dispatcher.release(slot.ticket, slot.done, clock.nanoTime());
                        slot.done = 0;
                    }
                    long[] piece = claim(true, size, true);
                    if (piece == null) {
                        return;
                    }
                    long askedNs = clock.nanoTime();
                    ask(fd, identifier, piece[0], piece[1]);
                    one.clear();
                    block.read(one, piece[0] + piece[1] - 1);
                    lastReadNs = clock.nanoTime();
                    read(piece[0] + piece[1]);
                    diskBinds = diskBinds(piece[1], lastReadNs - askedNs);
                    continue;
                }
                if (atDisk.isEmpty() && !next(slots[0].done > 0 ? slots[0] : slots[1].done > 0 ? slots[1] : slots[0],
                        true, atDisk, fd, identifier, size)) {
                    return;   // nothing more wanted: the reader is done (readers cleared under the lock)
                }
                while (ordered && !atDisk.isEmpty() && atDisk.size() < IN_FLIGHT
                        && next(atDisk.peek() == slots[0] ? slots[1] : slots[0], false, atDisk, fd, identifier, size)) {
                    // a second piece went into a free slot
                }
                Slot oldest = atDisk.poll();
                if (oldest != null) {
                    one.clear();
                    block.read(one, oldest.end - 1);   // waits for the kernel's read of the piece's last page
                    long now = clock.nanoTime();
                    oldest.done = oldest.bytes;
                    read(oldest.end);
                    // The disk's time for it: from when it was asked, or from the piece before it, queued ahead.
                    diskBinds = diskBinds(oldest.bytes, now - Math.max(oldest.askedNs, lastReadNs));
                    lastReadNs = now;
                }
            }
        } catch (java.nio.channels.ClosedChannelException e) {
            // the op ended and closed its block file while a piece was being read: nothing is left to read
        } catch (IOException | RuntimeException e) {
            AgentLog.once("read-ahead", "a read-ahead through the dispatcher failed; the op's reads go on", e);
        } finally {
            synchronized (this) {
                if (readers == slots) {
                    readers = null;
                }
            }
            for (Slot slot : slots) {
                dispatcher.release(slot.ticket, slot.done, clock.nanoTime());
                slot.done = 0;
            }
            LockSupport.unpark(opThread);
        }
    }

    /**
     * Whether the disk, having read a piece of BYTES in NS, is where this op's reads wait: its pieces took
     * longer than the volume's packets take to copy and send as many bytes (means of bytes and of time over
     * the op's last pieces, against the packets' mean time in their slots). Pieces in the page cache take
     * microseconds; where the disk is faster than the packets' way out, the packets' slots order the op's
     * reads and the disk's would order nothing. Means, not the last piece: the kernel's own read-ahead,
     * started by a piece's one-byte read, reads the next pieces before they are asked, and one piece in
     * several then waits for all of them. Before any packet was sent: yes.
     */
    private boolean diskBinds(long bytes, long ns) {
        diskBytes = Dispatcher.mean(diskBytes, bytes);
        diskNs = Dispatcher.mean(diskNs, ns);
        return slowerThanPackets(diskBytes, diskNs, packets == null ? 0 : packets.serviceNs());
    }

    /**
     * diskBinds' rule on its means (the model's too): pieces that took DISK_NS for DISK_BYTES at the disk are no
     * faster than the volume's packets, PACKET_NS a packet in their slots, for as many bytes (none sent yet: yes).
     */
    static boolean slowerThanPackets(double diskBytes, double diskNs, double packetNs) {
        return packetNs <= 0 || diskNs >= packetNs * diskBytes / Dispatcher.FIRST_PACKET_BYTES;
    }

    /**
     * The op's next piece, {offset, bytes}, sized as an ordered one is (pieceBytes: a packet's worth where
     * others move at the volume, so that one the page cache turns out not to hold costs them a packet's
     * time at most); null if nothing more is wanted (then, with LAST, the reader ends). UNORDERED: a piece
     * that takes no slot, claimed as dispatched here (an ordered one is once its slot is had).
     */
    private long[] claim(boolean last, long size, boolean unordered) {
        long at;
        long end;
        synchronized (this) {
            end = Math.min(wantedTo, size);
            if (ended || dispatchedTo >= end) {
                if (last) {
                    readers = null;   // under the lock a new request's run sees: it reads what this leaves
                }
                return null;
            }
            at = dispatchedTo;
        }
        // No weights: the rest at once, as Hadoop asks.
        long piece = share.weight > 0 ? dispatcher.pieceBytes(flow, end - at) : end - at;
        if (unordered) {
            synchronized (this) {
                if (ended) {
                    return null;
                }
                dispatchedTo = at + piece;
            }
        }
        return new long[] {at, piece};
    }

    /**
     * SLOT's ticket asks for the op's next piece and, once dispatched, the disk is asked for it (WILLNEED).
     * WAIT: nothing of the op is at the disk, so the piece waits for its turn as a packet does; else it only
     * takes a slot nobody waits for (Dispatcher.offer). Returns false if no piece was asked for: nothing more
     * is wanted (then, with WAIT, the reader ends), or no slot was free; the ticket then leaves the volume.
     */
    private boolean next(Slot slot, boolean wait, ArrayDeque<Slot> atDisk, FileDescriptor fd, String identifier,
                         long size) throws IOException {
        long[] claimed = claim(wait, size, false);
        if (claimed == null) {
            dispatcher.release(slot.ticket, slot.done, clock.nanoTime());
            slot.done = 0;
            return false;
        }
        long at = claimed[0];
        long piece = claimed[1];
        double weight = share.weight;
        if (weight > 0) {
            long now = clock.nanoTime();
            if (wait) {
                boolean reserved = !share.floor.unlimited() && share.floor.tryTake(piece, now);
                if (!dispatcher.ask(slot.ticket, slot.done, piece, weight, reserved, now)) {
                    slot.done = 0;   // counted by ask
                    dispatcher.await(slot.ticket, clock, () -> false);
                }
            } else if (!dispatcher.offer(slot.ticket, slot.done, piece, weight, now)) {
                slot.done = 0;   // counted as the ticket left
                return false;
            }
            slot.done = 0;   // counted by ask or offer
        }
        synchronized (this) {
            if (ended) {
                return false;   // its ticket leaves in read's finally
            }
            dispatchedTo = at + piece;
        }
        slot.askedNs = clock.nanoTime();
        ask(fd, identifier, at, piece);
        if (weight > 0) {
            slot.end = at + piece;
            slot.bytes = piece;
            atDisk.add(slot);
        } else {
            read(at + piece);   // unordered, as Hadoop's own: nothing waits for it
        }
        return true;
    }

    /** The disk is asked for PIECE bytes of the block at AT (WILLNEED: it queues the read and returns). */
    private void ask(FileDescriptor fd, String identifier, long at, long piece) throws IOException {
        org.apache.hadoop.io.nativeio.NativeIO.POSIX.getCacheManipulator().posixFadviseIfPossible(identifier,
                fd, at, piece, org.apache.hadoop.io.nativeio.NativeIO.POSIX.POSIX_FADV_WILLNEED);
        askedTo = at + piece;   // one reader at a time, in order
    }

    /**
     * The op's block file as a channel on its descriptor, made once. It shares the descriptor and is never
     * closed here: it closes with the op's stream. (An interrupt during its read would close both; nothing
     * interrupts the pool's threads while they run a task: ThreadPoolExecutor interrupts idle ones only,
     * short of shutdownNow.)
     */
    private synchronized FileChannel channel(FileDescriptor fd) {
        if (channel == null) {
            channel = new FileInputStream(fd).getChannel();
        }
        return channel;
    }

    /** Everything of the block before TO is in the page cache: the op's packet waiting for it goes on. */
    private void read(long to) {
        readTo = to;   // one reader at a time, in order
        LockSupport.unpark(opThread);
    }

    /** The disk was asked for everything of the block before this (tests). */
    long askedTo() {
        return askedTo;
    }

    /** The disk has read everything of the block before this (tests). */
    long readTo() {
        return readTo;
    }

    /** Requests made known and not yet run, on every op (tests). */
    static int made() {
        return MADE.size();
    }
}
