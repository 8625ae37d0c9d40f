package org.vnodesync.dnthrottle;

import java.util.ArrayList;
import java.util.List;
import java.util.PriorityQueue;
import java.util.concurrent.locks.LockSupport;

/**
 * One data volume's packets, reads and writes alike, dispatched by start-time fair queueing with a
 * depth: SFQ(D) (Jin, Chase and Kaur, SIGMETRICS 2004). docs/edge.md is the model this code follows.
 *
 * <p>A transfer thread asks before each packet it moves on the volume (its op's Ticket). The packet
 * gets the start tag S = max(F, V - burst) of its flow, F moves to S + bytes / weight, and at most
 * depth packets are in flight: the rest wait, and each packet done dispatches the waiting one with
 * the least start tag (a user alone at the volume is not bounded: alone). V is the start tag of the
 * last packet dispatched. Nothing here knows how fast
 * the volume is: a packet waits only while depth others are in flight, so whatever the volume, the
 * CPU or the network delivers is moved (work conservation), and what waits is ordered by weight.
 *
 * <ul>
 *   <li><b>Weights.</b> Backlogged flows are dispatched within one packet each of their weighted
 *       shares of the dispatches (SFQ's fairness bound, plus depth packets in flight).</li>
 *   <li><b>A returning flow</b> starts at most a burst behind V: its share of what the volume moved
 *       over BURST_NS is dispatched ahead of everyone, as a token bucket of that depth would let it
 *       go at the volume's speed, then it has its share (HFSC's two-piece curve; docs/edge.md).</li>
 *   <li><b>Floors</b> (mClock's reservations): a packet its flow's floor bucket covers goes ahead of
 *       the weighted ones and is not charged to its weight.</li>
 *   <li><b>Anticipation</b> (Iyer and Druschel, SOSP 2001; BFQ's idling): a write leaves the volume
 *       before its thread has its next packet from the network. If that packet would be the next
 *       dispatched and the thread's think time is shorter than a packet's service, its slot waits for
 *       it up to one service time: else a flow with one thread would lose its turn at every packet
 *       and the flows would alternate whatever their weights.</li>
 * </ul>
 * A packet held outside the volume (a slow client, a pipeline's far end) keeps its slot: the depth
 * grows until the volume is busy again (Depth). Ceilings are outside: a thread waits for its user's
 * ceiling before it asks (UserShare.ceiling), holding no slot.
 * One short lock; a waiting thread parks and is unparked by the packet that frees its slot.
 */
final class Dispatcher {
    /** A returning flow may take at once what its share moved over this long: a static cap's bucket (RateBucket.BURST_NS). */
    static final long BURST_NS = RateBucket.BURST_NS;
    /** The size a packet is tagged with before its op has moved one: Hadoop's packets are 64 KiB. */
    static final long FIRST_PACKET_BYTES = 64 * 1024;
    /**
     * How long a slot is worth handing over for. A slot handed over costs both threads a context switch,
     * ~25 us of CPU on the testbed (docs/edge.md section 7), so 2 ms keeps that near 1 % of the volume's time
     * on a disk of any speed. A thread that asks for its next packet while its last one holds the slot keeps
     * it while its tag is less than a slice of the volume's bytes ahead of the waiting packets' (keepsSlot);
     * a read-ahead piece of a user alone at the volume is what a piece moves in its slot in a slice
     * (pieceBytes), as each piece costs its reader a WILLNEED, a one-byte read and a wake-up of the op's thread.
     */
    static final long SLICE_NS = 2_000_000L;
    /** A waiting thread looks at its op's canceler this often (it is unparked at once when dispatched). */
    static final long PATIENCE_NS = 10_000_000L;
    /** Weight of a new sample in every running mean here (service, think time, pieces' bytes and time): ~16 packets. */
    static final double SMOOTHING = 1.0 / 16;

    /** MEAN moved SMOOTHING of the way to SAMPLE; the first sample (MEAN 0: none yet) is the mean. */
    static double mean(double mean, double sample) {
        return mean == 0 ? sample : mean + SMOOTHING * (sample - mean);
    }

    /** One op's place at the volume, reused for each of its packets; made per op, never per packet. */
    static final class Ticket {
        final Flow flow;
        final Direction direction;
        final Thread thread;
        final boolean piece;     // a read-ahead's piece (ReadAhead): its size is known when it asks
        double start;
        double finish;           // its flow's finish tag once it was tagged
        boolean reserved;        // its floor covers it: ahead of the weighted packets, not charged to the weight
        long sequence;           // arrival order among equal tags
        boolean waiting;
        boolean inFlight;
        volatile boolean go;     // dispatched: its thread may move the packet
        long lastBytes;          // its last packet's size, the next one's tag
        long dispatchedNs;
        long releasedNs = -1;    // when it last left the volume between packets (-1: it asked since)
        double thinkNs;          // its mean time from leaving the volume to asking again

        Ticket(Flow flow, Direction direction, Thread thread) {
            this(flow, direction, thread, false);
        }

        private Ticket(Flow flow, Direction direction, Thread thread, boolean piece) {
            this.flow = flow;
            this.direction = direction;
            this.thread = thread;
            this.piece = piece;
        }

        /** A ticket for FLOW's read-ahead pieces, read by THREAD. */
        static Ticket piece(Flow flow, Thread thread) {
            return new Ticket(flow, Direction.READ, thread, true);
        }
    }

    final String volume;
    private final PriorityQueue<Ticket> queue = new PriorityQueue<>(16, Dispatcher::order);
    private final List<Ticket> inFlight = new ArrayList<>();
    private final Depth control = new Depth();
    private int depth = 1;
    private int counted;                  // packets in flight, and a slot held for an anticipated one
    private Ticket anticipated;           // the ticket a free slot waits for (null: none)
    private long anticipatedUntil;
    private double serviceNs;             // a packet's mean time in its slot
    private double pieceBytes;            // a read-ahead piece's mean size (0: none read yet)...
    private double pieceNs;               // ...and its mean time in its slot: their ratio is what a slot moves per ns
    private double virtualTime;
    private long interval = 1;            // counts the depth's intervals (a Flow's 0: never dispatched)
    private int sharers;                  // flows with a packet waiting, dispatched or in flight this interval
    private Flow sole;                    // the flow, while it is the only one this interval
    private int lastSharers;              // the same for the interval before
    private Flow lastSole;
    private double burstBytes;            // what the volume moved over BURST_NS, at the last interval's rate
    private double backloggedWeight;      // the weight V advanced for over the last interval (bytes moved / V's advance)
    private double tickVirtualTime;
    private long tickNs = Long.MIN_VALUE;
    private long sequence;
    // The current interval.
    private long movedBytes;
    private long queuedSinceNs = -1;      // the queue has been non-empty since (-1: it is empty)
    private long queuedNs;
    private volatile double lastMovedBps;

    Dispatcher(String volume) {
        this.volume = volume;
    }

    /**
     * TICKET's thread moved BYTES (0: none yet) and asks for its next packet at NOW: returns true if it
     * may go at once, else it must await(). WEIGHT > 0; RESERVED: its floor covers this packet.
     */
    synchronized boolean ask(Ticket ticket, long bytes, double weight, boolean reserved, long now) {
        return ask(ticket, bytes, 0, weight, reserved, now);
    }

    /**
     * As ask, for a request whose SIZE is known before it moves (a piece of a read-ahead: ReadAhead); 0:
     * the size of the ticket's last packet, as a transfer's next packet is tagged.
     */
    synchronized boolean ask(Ticket ticket, long bytes, long size, double weight, boolean reserved, long now) {
        if (ticket.releasedNs >= 0) {
            double think = now - ticket.releasedNs;
            ticket.thinkNs = mean(ticket.thinkNs, think);
            ticket.releasedNs = -1;
        }
        boolean held = anticipated == ticket;
        if (held) {
            anticipated = null;
            counted--;   // the slot kept for it: taken below
        }
        movedBytes += bytes;
        if (bytes > 0) {
            ticket.lastBytes = bytes;
        }
        if (size <= 0) {
            size = ticket.lastBytes > 0 ? ticket.lastBytes : FIRST_PACKET_BYTES;
        }
        Flow flow = ticket.flow;
        present(flow);
        ticket.reserved = reserved;
        ticket.sequence = sequence++;
        if (reserved) {
            ticket.start = virtualTime;
        } else {
            // Back from idle its F is far behind V: it may start as far behind V as its share of a
            // burst (with itself counted among the backlogged), no further.
            double burst = burstBytes / (backloggedWeight + weight);
            ticket.start = Math.max(flow.finish, virtualTime - burst);
            flow.finish = ticket.start + size / weight;
            ticket.finish = flow.finish;
        }
        if (ticket.inFlight) {
            if (keepsSlot(ticket, weight)) {
                // Served out of its tag's order: V stays where the queue's order put it, else it would
                // jump to this flow's tags and the waiters, pulled up to it, would lose what they are owed.
                served(ticket, bytes, now);
                ticket.dispatchedNs = now;
                return true;
            }
            // Its next packet competes for the slot its last one frees: with one thread a flow, handing
            // the slot to the waiters first would alternate the flows whatever their weights.
            leave(ticket, bytes, now);
        }
        if ((held || queue.isEmpty()) && counted < depth || alone(flow)) {
            dispatch(ticket, now);
            return true;
        }
        ticket.waiting = true;
        ticket.go = false;
        if (queue.isEmpty()) {
            queuedSinceNs = now;
        }
        queue.add(ticket);
        pump(now);
        return ticket.go;
    }

    /** Parks the asking thread until its packet is dispatched (or CANCELLED says stop); returns the time waited. */
    long await(Ticket ticket, UserThrottler.Clock clock, java.util.function.BooleanSupplier cancelled) {
        long start = clock.nanoTime();
        while (!ticket.go) {
            long patience = PATIENCE_NS;
            synchronized (this) {
                long now = clock.nanoTime();
                expire(now);
                if (ticket.go) {
                    break;
                }
                if (cancelled.getAsBoolean() || Thread.currentThread().isInterrupted()) {
                    withdraw(ticket, now);
                    break;
                }
                if (anticipated != null) {
                    patience = Math.max(1, Math.min(patience, anticipatedUntil - now));
                }
            }
            LockSupport.parkNanos(this, patience);
        }
        return clock.nanoTime() - start;
    }

    /**
     * TICKET's packet of BYTES is done and its op asks nothing more for now: its transfer ended, or it
     * waits for its ceiling (a wait outside the volume holds no slot).
     */
    synchronized void release(Ticket ticket, long bytes, long now) {
        release(ticket, bytes, now, false);
    }

    /** As release; ANTICIPATE: its thread asks again for the op's next packet (a write between packets). */
    synchronized void release(Ticket ticket, long bytes, long now, boolean anticipate) {
        movedBytes += bytes;
        if (bytes > 0) {
            ticket.lastBytes = bytes;
        }
        if (anticipated == ticket) {
            anticipated = null;
            counted--;
        }
        if (ticket.inFlight) {
            leave(ticket, bytes, now);
            if (anticipate) {
                ticket.releasedNs = now;
                if (anticipated == null && !queue.isEmpty() && ticket.thinkNs > 0 && ticket.thinkNs < serviceNs
                        && ticket.flow.finish <= queue.peek().start) {
                    anticipated = ticket;
                    anticipatedUntil = now + (long) serviceNs;
                    counted++;   // its slot waits for it
                    return;
                }
            }
            pump(now);
        } else if (ticket.waiting) {
            withdraw(ticket, now);
        }
    }

    /**
     * TICKET, waiting, is not wanted any more (a read-ahead piece of an op that ended: ReadAhead): it leaves
     * the queue uncharged, its tag given back unless its flow was tagged since, and its thread goes on.
     */
    synchronized void cancel(Ticket ticket, long now) {
        if (ticket.waiting && !ticket.reserved && ticket.flow.finish == ticket.finish) {
            ticket.flow.finish = ticket.start;
        }
        withdraw(ticket, now);
        if (ticket.thread != Thread.currentThread()) {
            LockSupport.unpark(ticket.thread);
        }
    }

    /** At NOW: an anticipated packet that did not come by its time gives its slot to the queue. */
    synchronized void poll(long now) {
        expire(now);
    }

    private void expire(long now) {
        if (anticipated != null && now - anticipatedUntil >= 0) {
            anticipated = null;
            counted--;
            pump(now);
        }
    }

    private void withdraw(Ticket ticket, long now) {
        if (ticket.waiting && queue.remove(ticket)) {
            ticket.waiting = false;
            if (queue.isEmpty()) {
                queueEmptied(now);
            }
        }
        ticket.go = true;   // the thread goes on unscheduled rather than hang
    }

    /**
     * Whether TICKET's next packet, asked for while its last one holds the slot, keeps that slot: while
     * the slot is within the depth and its tag is less than a slice (SLICE_NS of what the volume moves, at its WEIGHT) ahead of every
     * waiting packet's. A slot handed over costs both threads a context switch; a slice at a time keeps
     * that small, and the order of the tags holds within one slice. A user back from idle starts far
     * behind (its burst), so the slot goes to it at the next packet.
     */
    private boolean keepsSlot(Ticket ticket, double weight) {
        if (counted > depth) {
            return false;   // the depth fell: this slot is one too many
        }
        Ticket head = queue.peek();
        if (head == null) {
            return true;
        }
        double slice = burstBytes * SLICE_NS / BURST_NS;
        return !head.reserved && ticket.start - head.start <= slice / weight;
    }

    /** TICKET's packet of BYTES is no longer in flight: its slot is free. */
    private void leave(Ticket ticket, long bytes, long now) {
        ticket.inFlight = false;
        inFlight.remove(ticket);
        counted--;
        served(ticket, bytes, now);
    }

    /**
     * TICKET's packet of BYTES is done at NOW: a sample of a packet's (and a piece's) time in its slot. A slot
     * that moved nothing (an op's end, a read giving its slot up to wait for its read-ahead) is no sample.
     */
    private void served(Ticket ticket, long bytes, long now) {
        if (bytes <= 0) {
            return;
        }
        double ns = now - ticket.dispatchedNs;
        serviceNs = mean(serviceNs, ns);
        if (ticket.piece) {
            // Means of bytes and of time, not of rates: a piece already in the page cache, read in microseconds,
            // adds its bytes and its few microseconds, where its rate alone would outweigh every other piece.
            pieceBytes = mean(pieceBytes, bytes);
            pieceNs = mean(pieceNs, ns);
        }
    }

    /**
     * The size of FLOW's next read-ahead piece here, REST bytes left to read, at most REST. Where other users
     * move at the volume, a packet's worth (FIRST_PACKET_BYTES): a piece then weighs what the packets it
     * competes with do, so a user whose one thread has one packet at a time still gets its turn every packet.
     * While FLOW is alone (alone), what a piece moved in its slot over a slice (SLICE_NS), in whole packets
     * (at least one), so that each packet's bytes are asked for by one piece: a piece then holds its slot about
     * a slice whatever the volume's speed, so the disk is asked for enough at once to stream, and a user
     * coming back waits behind at most the op's pieces in flight (ReadAhead.IN_FLIGHT slices), after which
     * the pieces are packets again.
     */
    synchronized long pieceBytes(Flow flow, long rest) {
        long packets = alone(flow) && pieceNs > 0 ? (long) (pieceBytes / pieceNs * SLICE_NS / FIRST_PACKET_BYTES) : 0;
        return Math.min(rest, Math.max(1, packets) * FIRST_PACKET_BYTES);
    }

    /** A packet's mean time in its slot here, ns (0: none served yet). */
    synchronized double serviceNs() {
        return serviceNs;
    }

    /** Whether FLOW is alone here (alone): nobody to order it against. */
    synchronized boolean isAlone(Flow flow) {
        return alone(flow);
    }

    /**
     * As ask for a read-ahead's piece of SIZE, but only into a slot that no other packet waits for (or
     * where its flow is alone): returns true if it was dispatched at once; else TICKET leaves, its last
     * piece of BYTES counted, and its flow is not tagged. An op's second piece in flight goes this way.
     */
    synchronized boolean offer(Ticket ticket, long bytes, long size, double weight, long now) {
        int others = counted - (ticket.inFlight ? 1 : 0);
        if (queue.isEmpty() && anticipated == null && others < depth || alone(ticket.flow)) {
            return ask(ticket, bytes, size, weight, false, now);
        }
        release(ticket, bytes, now);
        return false;
    }

    private void dispatch(Ticket ticket, long now) {
        ticket.waiting = false;
        ticket.inFlight = true;
        ticket.dispatchedNs = now;
        if (!ticket.reserved) {
            virtualTime = Math.max(virtualTime, ticket.start);
        }
        present(ticket.flow);
        inFlight.add(ticket);
        counted++;
        ticket.go = true;
    }

    /** FLOW has a packet waiting, dispatched or in flight in this interval: it counts among the users sharing the volume. */
    private void present(Flow flow) {
        if (flow.interval != interval) {
            flow.interval = interval;
            sharers++;
            sole = sharers == 1 ? flow : null;
        }
    }

    /**
     * Whether FLOW is the only one to have moved here this interval and the one before (a whole
     * interval, 100 ms, longer than any gap between one user's packets) and none other waits: with
     * nobody to order, the depth bounds nothing and the volume is driven as without vnode-sync
     * (docs/edge.md, section 3). A second flow's first packet waits for the depth like any other, and
     * from then on it applies.
     */
    private boolean alone(Flow flow) {
        if ((lastSharers != 0 && lastSole != flow) || (sharers != 0 && sole != flow)) {
            return false;
        }
        for (Ticket t : queue) {
            if (t.flow != flow) {
                return false;
            }
        }
        return true;
    }

    /** Dispatches waiting packets into free slots, least start tag first. */
    private void pump(long now) {
        while (!queue.isEmpty() && (counted < depth || alone(queue.peek().flow))) {
            Ticket next = queue.poll();
            if (queue.isEmpty()) {
                queueEmptied(now);
            }
            dispatch(next, now);
            if (next.thread != Thread.currentThread()) {
                LockSupport.unpark(next.thread);
            }
        }
    }

    private void queueEmptied(long now) {
        if (queuedSinceNs >= 0) {
            queuedNs += now - queuedSinceNs;
            queuedSinceNs = -1;
        }
    }

    /** A flow's weight changes at NOW: what it is still owed ahead of V is served at the new weight. */
    synchronized void reweigh(Flow flow, double oldWeight, double newWeight) {
        if (oldWeight > 0 && newWeight > 0 && flow.finish > virtualTime) {
            flow.finish = virtualTime + (flow.finish - virtualTime) * oldWeight / newWeight;
        }
    }

    /** The interval since the last call ends at NOW: the depth for the next one, and the burst. */
    synchronized void tick(long now) {
        if (queuedSinceNs >= 0) {
            queuedNs += now - queuedSinceNs;
            queuedSinceNs = now;
        }
        expire(now);
        if (tickNs != Long.MIN_VALUE && now > tickNs) {
            double seconds = (now - tickNs) / 1e9;
            double bps = movedBytes / seconds;
            // Binding: packets waited for a slot most of the interval, so it moved what the depth let it.
            boolean binding = queuedNs * 2 >= now - tickNs;
            depth = control.interval(bps, binding, sharers);
            double advanced = virtualTime - tickVirtualTime;
            backloggedWeight = advanced > 0 ? movedBytes / advanced : 0;
            burstBytes = bps * BURST_NS / 1e9;
            lastMovedBps = bps;
            pump(now);
        }
        tickNs = now;
        interval++;
        lastSharers = sharers;
        lastSole = sole;
        sharers = 0;
        sole = null;
        // A packet waiting or in flight across the interval's start is there in this interval too.
        for (Ticket t : queue) {
            present(t.flow);
        }
        for (Ticket t : inFlight) {
            present(t.flow);
        }
        tickVirtualTime = virtualTime;
        movedBytes = 0;
        queuedNs = 0;
    }

    synchronized int depth() {
        return depth;
    }

    synchronized int waiting() {
        return queue.size();
    }

    synchronized int inFlight() {
        return inFlight.size();
    }

    /** Whether a packet of another flow than FLOW is waiting or in flight here (short-circuit grants). */
    synchronized boolean busyBesides(Flow flow) {
        for (Ticket t : queue) {
            if (t.flow != flow) {
                return true;
            }
        }
        for (Ticket t : inFlight) {
            if (t.flow != flow) {
                return true;
            }
        }
        return false;
    }

    double movedBps() {
        return lastMovedBps;
    }

    /** STATS: "VOLUME id=... depth=... in_flight=... waiting=... moved_bps=... probes=... moves=..." */
    synchronized String statsLine() {
        return "VOLUME id=" + volume + " depth=" + depth + " in_flight=" + inFlight.size() + " waiting=" + queue.size()
                + " moved_bps=" + Math.round(lastMovedBps) + " probes=" + control.probes()
                + " moves=" + control.moves();
    }

    private static int order(Ticket a, Ticket b) {
        if (a.reserved != b.reserved) {
            return a.reserved ? -1 : 1;
        }
        int byTag = Double.compare(a.start, b.start);
        return byTag != 0 ? byTag : Long.compare(a.sequence, b.sequence);
    }
}
