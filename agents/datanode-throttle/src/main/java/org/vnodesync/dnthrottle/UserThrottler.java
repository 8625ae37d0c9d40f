package org.vnodesync.dnthrottle;

import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import org.apache.hadoop.hdfs.util.Canceler;
import org.apache.hadoop.hdfs.util.DataTransferThrottler;

/**
 * The throttler handed to one op in place of the node-wide one. Hadoop calls it after each packet the
 * op moved; it then waits for the user's ceiling. A read then asks the volume's Dispatcher for its
 * next packet (the first is asked for when the op starts, before any byte moves): its slot covers
 * the packet's read and send. A write asks only around the packet's write into its block file
 * (enterVolume, leaveVolume: Hooks.WRITE_DATA), so its slot does not cover the wait for the client's
 * next packet or the mirror down the pipeline, which are not the volume's. A read the DataNode reads
 * ahead of passes through two resources, each ordered where its queue forms (docs/edge.md, section 1):
 * from its first read-ahead request on, its disk reads are the requests' pieces at the volume
 * (ReadAhead), and its packets' copy and send take slots of the volume's packets' dispatcher
 * (Throttles.packets), a packet giving its slot up while it waits for its read-ahead. It counts the bytes and
 * the time waited, then passes them on to the node-wide throttler (if the DataNode has one). The
 * superclass's own bucket is never used.
 */
final class UserThrottler extends DataTransferThrottler {
    interface Clock {
        long nanoTime();
    }

    interface Sleeper {
        void sleepNanos(long ns) throws InterruptedException;
    }

    static final Clock SYSTEM_CLOCK = System::nanoTime;
    /** Parks for NS (Thread.sleep(ms, ns) rounds any nanoseconds up to a whole millisecond). */
    static final Sleeper SYSTEM_SLEEPER = ns -> {
        LockSupport.parkNanos(ns);
        if (Thread.interrupted()) {
            throw new InterruptedException();
        }
    };

    private final Throttles.Charge charge;
    private final UserShare share;
    private final DataTransferThrottler nodeWide;
    private final Clock clock;
    private final Sleeper sleeper;
    private final Dispatcher volume;
    private final Dispatcher packets;     // a read's packets' copy and send, once its read-ahead reads for it
    private final Flow packetsFlow;
    private Dispatcher dispatcher;        // where its packets take slots: the volume, or (reading ahead) packets
    private Dispatcher.Ticket ticket;
    private boolean asked;                // its next packet has asked where its packets take slots
    // The op's own counters, looked up once per op rather than once per packet.
    private final LongAdder counted;
    private final LongAdder waited;
    private final boolean reads;
    private ReadAhead readAhead;   // its read-ahead through the dispatcher, from its first request (null: none)
    private volatile Canceler canceler;

    /** CHARGE's op in DIRECTION on VOLUME (a storage ID, or Throttles.WHOLE_NODE) of THROTTLES. */
    UserThrottler(Throttles throttles, Throttles.Charge charge, Direction direction, String volume,
                  DataTransferThrottler nodeWide, Clock clock, Sleeper sleeper) {
        super(Long.MAX_VALUE);
        this.charge = charge;
        this.share = charge.share(direction);
        this.nodeWide = nodeWide;
        this.clock = clock;
        this.sleeper = sleeper;
        this.volume = throttles.volume(volume);
        this.packets = throttles.packets(volume);
        this.packetsFlow = throttles.flow(packets, charge);
        this.dispatcher = this.volume;
        this.ticket = new Dispatcher.Ticket(throttles.flow(this.volume, charge), direction, Thread.currentThread());
        UserCounters counters = charge.counters();
        this.counted = direction == Direction.READ ? counters.readBytes : counters.writeBytes;
        this.waited = direction == Direction.READ ? counters.readWaitNs : counters.writeWaitNs;
        this.reads = direction == Direction.READ;
        if (reads) {
            next(0);   // the op's first packet waits for its turn too
        }
    }

    String user() {
        return charge.name();
    }

    DataTransferThrottler nodeWide() {
        return nodeWide;
    }

    Dispatcher dispatcher() {
        return volume;
    }

    /** The transfer is over: the slot its next packet held is free, and its read-ahead asks for no more. */
    void close() {
        dispatcher.release(ticket, 0, clock.nanoTime());
        if (readAhead != null) {
            readAhead.end();
        }
    }

    /**
     * The op's read-ahead, made at its first request (on the op's thread): from then on its disk reads are
     * the requests', so the volume's slot its packet holds is given up, and its packets' copy and send take
     * the slots of the volume's packets.
     */
    ReadAhead readAhead() {
        if (readAhead == null) {
            readAhead = new ReadAhead(volume, ticket.flow, share, Thread.currentThread(), clock, packets);
            dispatcher.release(ticket, 0, clock.nanoTime());
            dispatcher = packets;
            ticket = new Dispatcher.Ticket(packetsFlow, Direction.READ, Thread.currentThread());
            asked = false;
        }
        return readAhead;
    }

    /**
     * After readaheadStream at POSITION of FD (SUBMITTED: it made a request): the packet about to be read
     * there waits for its read-ahead to have read it, holding no slot of the packets' (a wait at the disk is
     * not their queue's), then for its packets' slot (its ceiling and floor were taken for it already). Both
     * waits are the user's (its counters: a user whose reads wait is held, what the storage agent reports as
     * its demand).
     */
    void awaitReadAhead(java.io.FileDescriptor fd, long position, boolean submitted) {
        if (readAhead == null) {
            return;
        }
        long start = clock.nanoTime();
        boolean gaveUp = readAhead.afterStream(fd, position, submitted, this::cancelled,
                () -> dispatcher.release(ticket, 0, clock.nanoTime()));
        long ns = clock.nanoTime() - start;
        if (ns > 0) {
            this.waited.add(ns);
        }
        if (gaveUp || !asked) {
            asked = true;
            long now = clock.nanoTime();
            double weight = share.weight;
            if (weight > 0 && !dispatcher.ask(ticket, 0, weight, false, now)) {
                dispatcher.await(ticket, clock, this::cancelled);
                this.waited.add(clock.nanoTime() - now);
            }
        }
    }

    @Override
    public void throttle(long numOfBytes) {
        throttle(numOfBytes, null);
    }

    @Override
    public void throttle(long numOfBytes, Canceler canceler) {
        this.canceler = canceler;
        try {
            counted.add(numOfBytes);
            next(numOfBytes);
        } catch (RuntimeException | Error e) {
            AgentLog.once("throttle", "per-user throttling failed; the op goes on unthrottled by user", e);
        }
        if (nodeWide != null) {
            nodeWide.throttle(numOfBytes, canceler);
        }
    }

    /** A write's packet is about to go into its block file: it waits for its turn at the volume. */
    void enterVolume() {
        long start = clock.nanoTime();
        double weight = share.weight;
        if (weight <= 0) {
            return;
        }
        boolean reserved = !share.floor.unlimited() && share.floor.tryTake(Dispatcher.FIRST_PACKET_BYTES, start);
        if (!dispatcher.ask(ticket, 0, weight, reserved, start)) {
            dispatcher.await(ticket, clock, this::cancelled);
            waited.add(clock.nanoTime() - start);
        }
    }

    /** ...and LENGTH bytes of it are in: its slot is free. */
    void leaveVolume(long length) {
        dispatcher.release(ticket, length, clock.nanoTime(), true);
    }

    /** The op moved BYTES (0: none yet): its next packet waits for the ceiling, then (a read) for its turn. */
    private void next(long bytes) {
        asked = true;
        if (!reads) {
            long start = clock.nanoTime();
            long ceilingNs = share.ceiling.unlimited() ? 0 : share.ceiling.reserve(Math.max(bytes, 1), start);
            if (ceilingNs > 0) {
                sleep(ceilingNs);
                waited.add(clock.nanoTime() - start);
            }
            return;
        }
        long start = clock.nanoTime();
        long now = start;
        double weight = share.weight;
        long ceilingNs = share.ceiling.unlimited() ? 0 : share.ceiling.reserve(Math.max(bytes, 1), now);
        if (ceilingNs > 0 || weight <= 0) {
            dispatcher.release(ticket, bytes, now);   // no slot is held while it waits outside the volume
            bytes = 0;
            if (ceilingNs > 0) {
                sleep(ceilingNs);
                now = clock.nanoTime();
            }
            if (weight <= 0) {
                waited.add(now - start);
                return;
            }
        }
        long size = bytes > 0 ? bytes : Dispatcher.FIRST_PACKET_BYTES;
        // Reading ahead, its floor is taken at the disk, by its pieces (ReadAhead), not twice.
        boolean reserved = readAhead == null && !share.floor.unlimited() && share.floor.tryTake(size, now);
        if (!dispatcher.ask(ticket, bytes, weight, reserved, now)) {
            dispatcher.await(ticket, clock, this::cancelled);
        }
        waited.add(clock.nanoTime() - start);
    }

    boolean cancelled() {
        Canceler c = canceler;
        return c != null && c.isCancelled();
    }

    private void sleep(long ns) {
        try {
            sleeper.sleepNanos(ns);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
