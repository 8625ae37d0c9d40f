package org.vnodesync.dnthrottle;

/**
 * One direction of one DataNode: every packet's bytes are scheduled against a virtual server of rate R
 * (bytes/s) shared by the backlogged flows in proportion to their weights, within each flow's floor and
 * under its ceiling.
 *
 * <p>Virtual time V is that of Generalized Processor Sharing at rate R (Parekh and Gallager): it grows
 * at R / (sum of the weights of the backlogged flows), and a flow is backlogged while its finish tag is
 * ahead of V. Hadoop calls the throttler after a packet has moved, so a call is taken as the arrival of
 * the op's next packet, charged at the size of the one just moved (corrected at the next call, refunded
 * when the transfer ends): while it is in flight its flow is counted, as GPS counts a packet in
 * service. The packet gets the start tag S = max(V, F) and F = S + bytes / weight, as in Start-time
 * Fair Queueing (Goyal, Vin and Cheng, SIGCOMM 1996), and its thread goes on once V reaches S. A flow
 * whose tag V has passed holds nothing back (it is not in the sum) and its next packet starts at V:
 * served at once, then at its share, with no loop in between. A flow slower than its share for its own
 * reasons (a slow client) leaves the sum as soon as V passes its charge and the rest goes to the
 * others; so does a flow held by its ceiling. One held by its weight a moment ago stays in the sum
 * KEEP_NS past its tag (keeps()), and if its thread comes back within it, what V gave it meanwhile is
 * served at once (its next start is its own finish, behind V): a preempted thread, or a pipeline's
 * packet held at its other node, does not hand its share to the others. Its op ending ends the keep.
 *
 * <p>Floors follow mClock's reservation tags (Gulati, Merchant and Varman, OSDI 2010): a packet whose
 * floor makes it due before its weight does is released at the floor's pace and not charged to the
 * weight, and the virtual server spends bytes / R on it (V stands still that long), so the weights share
 * what the floors leave. Ceilings are mClock's limit tags: a per-flow token bucket outside the lock.
 *
 * <p>R is the node's capacity as CapacityControl estimates it; 0 turns the weights off (ceilings only).
 * A short lock guards the virtual time and the heap of backlogged flows; it is never held across a
 * sleep, and nothing is allocated per packet: the caller's Ticket carries the packet's tags.
 */
final class WeightedScheduler {
    /** A sleeping thread looks again at least this often, so a flow that left is noticed within it. */
    static final long MAX_SLICE_NS = 10_000_000L;
    /**
     * A packet due sooner than this goes at once: its flow runs up to this far ahead of its tags (they
     * carry the debt, so its next sleep is longer and its rate stays). A sleep per 64 KiB packet at
     * hundreds of MB/s would cost more than the packet (a park's timer slack is 50 us or more).
     */
    static final long LEAST_SLEEP_NS = 1_000_000L;
    /** What a flow back from a pause may take at once: this long at its share (as RateBucket's burst). */
    static final long CREDIT_NS = RateBucket.BURST_NS;
    /** A writer with no packet for this long is a user back from idle, not a pipeline between blocks. */
    static final long IDLE_NS = 1_000_000_000L;
    /**
     * While a reader back from a pause spends its credit, the other readers' weighted packets wait
     * (as a token bucket's burst goes at the node's speed while a cap holds the others): their reads
     * would otherwise queue in the disk ahead of its own, where the DataNode cannot reorder them.
     * The wait ends when its credit is spent, its op ends, or no packet of it arrived for this long,
     * so a flow that trickles holds nobody for more than this after each pause. Writes land in the
     * page cache, where nothing of the others' is served first: no wait there.
     */
    static final long BURST_QUIET_NS = 10_000_000L;
    /**
     * A read opened after a pause starts its burst before its first packet is read, and holds the
     * others at most this long for it (the disk may first serve what they queued before).
     */
    static final long BURST_FIRST_NS = 50_000_000L;
    /** Another flow's packet arrived within this: the arriving one is a second active flow. */
    static final long SECOND_FLOW_NS = 50_000_000L;

    /** The tags of the packet an op waits for; one per op, reused for each of its packets. */
    static final class Ticket {
        double start;        // virtual start tag; valid while weighted
        double startScale = 1;   // its flow's retag map when the tag was made (Flow.retagScale, retagShift)
        double startShift;
        boolean weighted;    // waits for V to reach start
        long epoch;          // the scheduler's epoch the tags belong to
        long charged;        // bytes charged for the op's next packet (0: none)
        long ceilingDue;     // when the ceiling lets it go (ns)
        long arriving;       // bytes of the op's next packet, waiting for its ceiling before it arrives
        long releasedNs;     // when the op's thread went on with its last packet (0: none yet)
        double paceNs;       // ns per byte its packets take in flight, smoothed
        boolean whole;       // its last arrival was charged its whole size (not taken for a slow client)
        int paces;           // packets that paceNs has seen

        /** The op's thread goes on with its next packet at NOW. */
        void released(long now) {
            releasedNs = now;
        }
    }

    /**
     * A flow whose packets take this many times as long in flight as the fastest flow's is held by
     * something of its own (its client, the rest of its pipeline), not by the node: lowering R would
     * not speed it up, only slow the others. Flows held by the node move their packets alike.
     */
    static final double UNEVEN_PACE = 1.25;
    /** A flow whose last packet is older than this at an interval's end ended in it (its bytes are part of one). */
    static final long LIVE_NS = 20_000_000L;
    /** A flow that waited for its weight this share of an interval was not short of R. */
    static final double WAITED = 0.1;
    /** Weight of a new in-flight sample in Ticket.paceNs. */
    private static final double PACE_SMOOTHING = 0.25;
    /** An op whose packets take this many times as long as another flow's is slow by itself. */
    static final double SLOW = 2.0;
    /** ... once it has moved this many packets (its first ones meet a node still busy with the others). */
    private static final int PACES_BEFORE_SLOW = 4;
    /**
     * A flow that keeps up with its share keeps it this long while its packet is in flight: charged at
     * least this much of its share at arrival, it stays in the sum if its thread is preempted or its
     * read waits in the disk a moment, and the others do not take what it would have moved. Without it
     * a flow at a large weight, whose packets are due closest together, dropped out at every such
     * moment and got 0.9 of its share beside a smaller weight's 1.07 (measured on a busy 2-core node).
     */
    static final long IN_FLIGHT_NS = 500_000L;
    /** A flow that waited for its weight this recently keeps its share this long while away (keeps()). */
    static final long KEEP_NS = 10_000_000L;
    static final long HELD_RECENT_NS = 100_000_000L;
    /** A slow flow's next packet is charged at least this fraction of its size at arrival. */
    static final double LEAST_PRECHARGE = 0.1;

    /** Counts over one interval of the capacity control. */
    static final class Interval {
        private final long bytes;
        private final long packets;
        private final long heldPackets;
        private final long heldNs;
        private final int continuingFlows;
        private final double skew;
        private final double skewAnyPace;

        Interval(long bytes, long packets, long heldPackets, long heldNs, int continuingFlows, double skew,
                 double skewAnyPace) {
            this.bytes = bytes;
            this.packets = packets;
            this.heldPackets = heldPackets;
            this.heldNs = heldNs;
            this.continuingFlows = continuingFlows;
            this.skew = skew;
            this.skewAnyPace = skewAnyPace;
        }

        long bytes() {
            return bytes;
        }

        long packets() {
            return packets;
        }

        long heldPackets() {
            return heldPackets;
        }

        long heldNs() {
            return heldNs;
        }

        int continuingFlows() {
            return continuingFlows;
        }

        double skew() {
            return skew;
        }

        double skewAnyPace() {
            return skewAnyPace;
        }

        /** The share of packets that waited for their weight. */
        double heldFraction() {
            return packets == 0 ? 0 : (double) heldPackets / packets;
        }
    }

    private final boolean burstsHold;   // reads: a burst holds the others (BURST_QUIET_NS)
    private final Object lock = new Object();
    private Flow[] heap = new Flow[16];
    private int size;
    private double virtualTime;
    private long epoch;                // grows when V restarts from 0 (nothing backlogged)
    private long serverNs;             // V is known up to here; beyond now while the server serves floors
    private boolean started;
    private double backloggedWeight;
    private volatile long rate;        // R, bytes/s; 0: no weights
    private volatile long configured;  // the node's configured capacity, bytes/s (what caps would divide)
    private long sharedRate;           // R the moment a second flow is active (<= rate)
    private volatile Flow burstFlow;   // the flow spending its credit with the others held (null: none)
    private long burstEndNs;           // when its credit would be spent at R
    private long burstFirstNs;         // until when the others wait for its first packet (an opened read)
    private Flow lastFlow;             // the flow of the last arrival, and when it was
    private long lastFlowNs;
    private long bytes;
    private long packets;
    private long heldPackets;
    private long heldNs;
    private int continuingFlows;       // flows with a packet continuing a charged op in this interval
    private Flow[] counted = new Flow[16];   // those flows
    private long intervalStartNs;
    private int intervals;             // intervals taken so far (Flow.interval marks the last it was counted in)

    private WeightedScheduler(boolean burstsHold) {
        this.burstsHold = burstsHold;
    }

    static WeightedScheduler forReads() {
        return new WeightedScheduler(true);
    }

    static WeightedScheduler forWrites() {
        return new WeightedScheduler(false);
    }

    long rate() {
        return rate;
    }

    long sharedRate() {
        synchronized (lock) {
            return sharedRate;
        }
    }

    /** The node's configured capacity in this direction: a returning writer's credit is its share of it. */
    void setConfigured(long bytesPerSecond) {
        configured = Math.max(0, bytesPerSecond);
    }

    /** R from NOW on (V up to NOW grew at the old one). */
    void setRate(long bytesPerSecond, long now) {
        setRates(bytesPerSecond, bytesPerSecond, now);
    }

    /**
     * R from NOW on, and SHARED (at most R): R from the moment a second flow is backlogged, without
     * waiting for the capacity control. A flow alone may be let climb above what the node is known
     * to deliver to several (CapacityControl), and the next flow to arrive must not meet that.
     */
    void setRates(long bytesPerSecond, long shared, long now) {
        synchronized (lock) {
            advance(now);
            rate = Math.max(0, bytesPerSecond);
            sharedRate = Math.max(0, Math.min(rate, shared));
        }
    }

    /**
     * A flow's new weight at NOW (0: the flow is not scheduled by weight). Its tags still ahead of V (its
     * finish, and the starts its waiting packets were given) are moved to where the new weight puts
     * them: what it is still owed is served at the new weight from now on. A packet tagged under a
     * weight the center raised a moment later (a user just back, with a trace weight) would otherwise
     * wait seconds behind a tag its old weight set, and move nothing meanwhile.
     */
    void setWeight(Flow flow, double weight, long now) {
        synchronized (lock) {
            advance(now);
            double next = weight > 0 && Double.isFinite(weight) ? weight : 0;
            if (flow.backlogged()) {
                if (next > 0) {
                    backloggedWeight += next - flow.weight;
                    retag(flow, flow.weight / next);
                } else {
                    remove(flow);
                }
            }
            flow.weight = next;
        }
    }

    /** FLOW's tags ahead of V move to V + (tag - V) * SCALE (a weight change, old / new). */
    private void retag(Flow flow, double scale) {
        if (scale == 1) {
            return;
        }
        if (flow.retagEpoch != epoch) {
            flow.retagScale = 1;
            flow.retagShift = 0;
            flow.retagEpoch = epoch;
        }
        flow.retagScale *= scale;
        flow.retagShift = virtualTime + (flow.retagShift - virtualTime) * scale;
        flow.finish = virtualTime + (flow.finish - virtualTime) * scale;
        flow.keep *= scale;
        siftDown(flow.heapIndex);
        siftUp(flow.heapIndex);
    }

    /** Where TICKET's start tag is now: moved with its flow's tags by every weight change since it was made. */
    private static double startOf(Flow flow, Ticket ticket) {
        if (flow.retagEpoch != ticket.epoch) {
            return ticket.start;
        }
        return flow.retagScale * ((ticket.start - ticket.startShift) / ticket.startScale) + flow.retagShift;
    }

    /**
     * FLOW has just moved BYTES at NOW (ns): books them and returns when its thread may go on (ns; NOW or
     * earlier: at once). TICKET is filled for recheck, which the caller must call after each sleep.
     * The op's next packet arrives once its ceiling lets it (mClock's limit tags gate eligibility, so a
     * flow waiting on its ceiling holds no share of anyone's), and then waits for its floor or weight.
     */
    long admit(Flow flow, long bytes, long now, Ticket ticket) {
        ticket.weighted = false;
        ticket.arriving = 0;
        long ceilingDue = flow.ceiling.unlimited() ? now : now + flow.ceiling.reserve(bytes, now);
        ticket.ceilingDue = ceilingDue;
        synchronized (lock) {
            this.bytes += bytes;
            packets++;
            long r = rate;
            if (r <= 0 || flow.weight <= 0) {
                return ceilingDue;
            }
            advance(now);
            // A continuing op's packet: its flow's bytes this interval (skew()).
            if (ticket.charged > 0) {
                if (flow.interval != intervals) {
                    flow.throughout = flow.interval == intervals - 1;
                    flow.interval = intervals;
                    flow.intervalBytes = 0;
                    flow.intervalHeldNs = 0;
                    flow.capped = false;
                    flow.partial = false;
                    if (continuingFlows == counted.length) {
                        counted = java.util.Arrays.copyOf(counted, 2 * counted.length);   // grows with users
                    }
                    counted[continuingFlows++] = flow;
                }
                flow.intervalBytes += bytes;
                flow.lastContinuedNs = now;
                flow.capped |= ceilingDue > now;
                flow.partial |= !ticket.whole;
            }
            // The packet that moved was charged when it arrived, at its predecessor's size.
            recharge(flow, ticket, bytes);
            samplePace(flow, ticket, bytes, now);
            if (ceilingDue > now) {
                ticket.arriving = bytes;
                return ceilingDue;
            }
            long due = arrive(flow, bytes, now, ticket, r);
            if (due > now && flow.interval == intervals) {
                flow.intervalHeldNs += due - now;
            }
            return due;
        }
    }

    /** After a sleep: when the ticket's packet may go on, as of NOW. */
    long recheck(Flow flow, long now, Ticket ticket) {
        if (ticket.arriving == 0 && !ticket.weighted) {
            return ticket.ceilingDue;
        }
        synchronized (lock) {
            long r = rate;
            advance(now);
            if (ticket.arriving > 0) {
                if (now < ticket.ceilingDue) {
                    return ticket.ceilingDue;
                }
                long bytes = ticket.arriving;
                ticket.arriving = 0;
                return r > 0 && flow.weight > 0 ? arrive(flow, bytes, now, ticket, r) : now;
            }
            if (r <= 0) {
                return now;
            }
            if (flow.weight <= 0) {
                return now;   // no longer scheduled by weight (setWeight 0)
            }
            return Math.max(ticket.epoch == epoch ? dueOf(startOf(flow, ticket), now, r) : now, burstHold(flow, now));
        }
    }

    /**
     * The op's next packet (about BYTES) arrives at NOW: charged, then due by its credit, its floor or its
     * weight. A flow alone is paced at R too: R sits a little under what the node delivers, so the
     * node's own queues (a disk's, read-ahead) stay short and the next flow to arrive is not stuck
     * behind a queue the lone one filled (measured: a returning reader's first bytes waited 250 ms
     * behind an unpaced one on a paced disk).
     */
    private long arrive(Flow flow, long bytes, long now, Ticket ticket, long r) {
        double start;
        if (flow.backlogged()) {
            // Still in the sum: its own finish, even one V has passed while its thread was away (kept;
            // V grew for it meanwhile, so what it missed is served now, and the others did not take it).
            start = flow.finish;
        } else {
            r = comeBack(flow, now, r);
            start = virtualTime;
        }
        if (burstFlow == flow) {
            burstFirstNs = 0;
        }
        arrived(flow, now);
        long charge = precharge(flow, ticket, bytes, r);
        if (flow.credit > 0) {
            // Served from its credit: like a floor, outside the weights, and the virtual server spends
            // bytes / R on it, so the others are held back for it and not the other way round. Not a
            // writer back from idle (Flow.creditAside): see comeBack.
            flow.credit -= bytes;
            if (flow.credit <= 0 && burstFlow == flow) {
                burstFlow = null;
            }
            if (!flow.creditAside) {
                serverNs = Math.max(serverNs, now) + nanos(bytes, r);
            }
            ticket.charged = 0;
            ticket.whole = false;
            return now;
        }
        flow.finish = start + charge / flow.weight;
        flow.keep = keeps(flow, now, r);
        flow.finishEpoch = epoch;
        if (flow.backlogged()) {
            siftDown(flow.heapIndex);
            siftUp(flow.heapIndex);
        } else {
            push(flow);
        }
        ticket.charged = charge;
        ticket.whole = charge >= bytes;
        ticket.epoch = epoch;
        long weightDue = Math.max(dueOf(start, now, r), burstHold(flow, now));
        long floorDue = flow.floor.unlimited() ? Long.MAX_VALUE : now + flow.floor.reserve(bytes, now);
        if (floorDue < weightDue) {
            recharge(flow, ticket, 0);
            serverNs = Math.max(serverNs, now) + nanos(bytes, r);
            return floorDue;
        }
        ticket.weighted = true;
        ticket.start = start;
        boolean retagged = flow.retagEpoch == epoch;
        ticket.startScale = retagged ? flow.retagScale : 1;
        ticket.startShift = retagged ? flow.retagShift : 0;
        if (weightDue > now) {
            heldPackets++;
            heldNs += weightDue - now;
            flow.lastHeldNs = now;
        }
        return weightDue;
    }

    /**
     * How far past its finish tag FLOW stays in the sum (virtual time): KEEP_NS at its share while it
     * has waited for its weight within HELD_RECENT_NS; else 0 (one slower than its share for its own
     * reasons, a slow client, never waits, and leaves at once). A flow held by its weight wants more
     * than its share, so a moment away is its thread preempted or its pipeline's other node holding a
     * packet, not a want of data: as BFQ idles a few ms on a sync queue. Without it such a flow
     * dropped out at each hiccup longer than its packet's turn, came back at V, and what it missed
     * went to the others: 1.2-1.6 instead of 2 in SchedulerTest; privacy writes on a 2-core node split
     * 1.63-1.73 with the DataNodes holding 1:2 weights. A packet charged in part (precharge) is kept
     * too: its flow's thread is the one slow in flight there.
     */
    private double keeps(Flow flow, long now, long r) {
        if (now - flow.lastHeldNs >= HELD_RECENT_NS) {
            return 0;
        }
        double weights = backloggedWeight + (flow.backlogged() ? 0 : flow.weight);
        return KEEP_NS / 1e9 * r / weights;
    }

    /**
     * FLOW, not backlogged, sends again at NOW: R as it is for several flows, and its credit if it is
     * back from a pause. Returns R.
     */
    private long comeBack(Flow flow, long now, long r) {
        if (sharedRate < r && lastFlow != flow && lastFlow != null && now - lastFlowNs < SECOND_FLOW_NS
                && sharedRate > 0) {
            // A second flow while another is active (a flow alone at an R above what the node
            // delivers is rarely backlogged: V passes it between its packets): R back at once to
            // what the node delivers to several.
            rate = r = sharedRate;
        }
        if (now - flow.lastArrivalNs >= CREDIT_NS) {
            // Back after a pause (no packet for CREDIT_NS; a flow that only fell behind for a moment
            // gets nothing): CREDIT_NS at its share is its to take at once, as a token bucket's
            // burst is, so a short transfer after an idle spell is no slower than under a cap.
            // A writer back from IDLE_NS or more: its share of the configured capacity, beside the
            // others' shares, as a cap's burst is: the page cache takes it whatever R is. Charged to
            // the server, it held her own next packets until R had paid for it (4 MiB after 1.5 s
            // idle took 1.9x static's time, measured). Shorter pauses are a writer's pipeline between
            // blocks or stalled: taken beside the others, those credits cost bulk writes their split
            // (1.77 against 1.85 over six runs each).
            flow.creditAside = !burstsHold && now - flow.lastArrivalNs >= IDLE_NS;
            long base = flow.creditAside ? Math.max(r, configured) : r;
            flow.credit = (long) (CREDIT_NS / 1e9 * base * flow.weight / (backloggedWeight + flow.weight));
            if (flow.credit > 0 && burstsHold) {
                burstFlow = flow;
                burstEndNs = now + nanos(flow.credit, r);
                burstFirstNs = 0;
            }
        }
        return r;
    }

    /**
     * FLOW opens a read at NOW, before its first packet is read: a flow back from a pause starts its
     * burst here, so the others' reads do not queue in the disk ahead of that packet's.
     */
    void openingRead(Flow flow, long now) {
        if (rate <= 0 || flow.weight <= 0) {
            return;
        }
        synchronized (lock) {
            long r = rate;
            advance(now);
            if (r <= 0 || flow.backlogged() || now - flow.lastArrivalNs < CREDIT_NS) {
                return;
            }
            comeBack(flow, now, r);
            if (burstFlow == flow) {
                burstFirstNs = now + BURST_FIRST_NS;
            }
            arrived(flow, now);
        }
    }

    /** FLOW sent at NOW: the last arrival, its own and the node's. */
    private void arrived(Flow flow, long now) {
        flow.lastArrivalNs = now;
        lastFlow = flow;
        lastFlowNs = now;
    }

    private void samplePace(Flow flow, Ticket ticket, long bytes, long now) {
        if (ticket.releasedNs > 0 && now > ticket.releasedNs && bytes > 0) {
            double pace = (double) (now - ticket.releasedNs) / bytes;
            ticket.paceNs = ticket.paces == 0 ? pace : ticket.paceNs + PACE_SMOOTHING * (pace - ticket.paceNs);
            ticket.paces++;
            flow.paceNs = flow.paceNs == 0 ? pace : flow.paceNs + PACE_SMOOTHING * (pace - flow.paceNs);
        }
    }

    /**
     * What the op's next packet (about BYTES) is charged as it arrives. A packet in flight moves slower
     * than the flow's share when its client is slow (a slow reader, a slow pipeline): charged whole at
     * arrival it would hold the flow in the sum for its share's time while it moves far fewer bytes, and
     * the others would get less than it leaves. But a packet also moves slowly when the node is busy
     * with everyone's packets, and a flow charged less for that would drop out of the sum and lose its
     * share to the others, in a spiral. The two are told apart by the other backlogged flows: an op
     * whose packets take more than SLOW times as long as the fastest other flow's do is slow for its own
     * reasons, and is charged at arrival only what its share, or SLOW times that flow's pace, would move
     * while its packet is in flight. The rest is charged when the packet is done if the flow is still
     * backlogged then (if V has passed it, it was slower than its share and took nothing from anyone).
     */
    private long precharge(Flow flow, Ticket ticket, long bytes, long r) {
        if (ticket.paces < PACES_BEFORE_SLOW) {
            return bytes;
        }
        double weights = backloggedWeight + (flow.backlogged() ? 0 : flow.weight);
        double fluidPaceNs = 1e9 * weights / (flow.weight * r);
        if (ticket.paceNs <= fluidPaceNs) {
            // Keeps up with its share (the common case, no scan): its share is kept for it while its
            // packet is in flight, up to IN_FLIGHT_NS (corrected to the packet's size at the next call);
            // no more than its ceiling would let it move meanwhile.
            double keptBps = 1e9 / fluidPaceNs;
            if (!flow.ceiling.unlimited()) {
                keptBps = Math.min(keptBps, flow.ceiling.rate());
            }
            return Math.max(bytes, Math.round(IN_FLIGHT_NS / 1e9 * keptBps));
        }
        double fastest = Double.MAX_VALUE;
        for (int i = 0; i < size; i++) {
            if (heap[i] != flow && heap[i].paceNs > 0) {
                fastest = Math.min(fastest, heap[i].paceNs);
            }
        }
        if (fastest == Double.MAX_VALUE) {
            return bytes;
        }
        double fraction = Math.max(fluidPaceNs, SLOW * fastest) / ticket.paceNs;
        return Math.max(1, Math.round(bytes * Math.max(LEAST_PRECHARGE, Math.min(1, fraction))));
    }

    /**
     * The op of TICKET moved its last packet: what was charged for a next one is given back, and a
     * burst of its flow ends (the others go on at once rather than after BURST_QUIET_NS).
     */
    void release(Flow flow, Ticket ticket) {
        if (ticket.charged == 0 && burstFlow != flow) {
            return;
        }
        synchronized (lock) {
            recharge(flow, ticket, 0);
            unkeep(flow);   // its op sends no more: nothing to keep its share for
            if (burstFlow == flow) {
                burstFlow = null;
            }
        }
    }

    /** The counts since the last call, at NOW (for the capacity control). */
    Interval takeInterval(long now) {
        synchronized (lock) {
            Interval out = new Interval(bytes, packets, heldPackets, heldNs, continuingFlows, skew(now, true),
                    skew(now, false));
            intervalStartNs = now;
            java.util.Arrays.fill(counted, 0, continuingFlows, null);
            continuingFlows = 0;
            intervals++;
            bytes = 0;
            packets = 0;
            heldPackets = 0;
            heldNs = 0;
            return out;
        }
    }

    /**
     * Over this interval's flows that kept sending from before it to its end, held by no ceiling, with
     * no floor and, if EVEN_PACE, charged their packets whole and moving them about as fast as the
     * fastest (UNEVEN_PACE): the most bytes per weight any of them moved over the least (1: the weights
     * held; 0: fewer than two). Above 1 they did not share by weight although all kept asking, and the
     * one served least hardly waited for its weight: R is above what the node gives it. Without
     * EVEN_PACE a flow slow in flight counts too, and so does one that waited for its weight: on a node
     * whose CPU is saturated its thread may be slow in flight, and drop out of the sum between its
     * waits, for want of the CPU the others' threads take, which a lower R gives back (CapacityControl
     * tells which, and SkewAnswer undoes a lowering that did not help).
     */
    private double skew(long now, boolean evenPace) {
        double fastest = Double.MAX_VALUE;
        for (int i = 0; i < continuingFlows; i++) {
            if (counted[i].paceNs > 0) {
                fastest = Math.min(fastest, counted[i].paceNs);
            }
        }
        double most = 0;
        Flow least = null;
        int flows = 0;
        for (int i = 0; i < continuingFlows; i++) {
            Flow flow = counted[i];
            if (flow.capped || flow.weight <= 0 || !flow.floor.unlimited()   // a floor's bytes are not by weight
                    || evenPace && (flow.partial   // charged in part: slow by itself (precharge)
                        || flow.paceNs > UNEVEN_PACE * fastest)   // slower in flight than the node makes the others
                    || !flow.throughout || now - flow.lastContinuedNs > LIVE_NS) {   // began or ended in it
                continue;
            }
            double perWeight = flow.intervalBytes / flow.weight;
            most = Math.max(most, perWeight);
            if (least == null || perWeight < least.intervalBytes / least.weight) {
                least = flow;
            }
            flows++;
        }
        if (flows < 2 || least.intervalBytes <= 0) {
            return 0;
        }
        // The flow served least spent a good part of the interval waiting for its weight: R gave it
        // its share and something else held it back. Not on a saturated CPU (any pace): there a flow
        // that waits for its weight still loses its place whenever its thread is slow in flight.
        if (evenPace && least.intervalHeldNs >= WAITED * (now - intervalStartNs)) {
            return 1;
        }
        return most / (least.intervalBytes / least.weight);
    }

    /** Whether a flow other than FLOW is backlogged now (short-circuit grants). */
    boolean backloggedBesides(Flow flow) {
        synchronized (lock) {
            return size > (flow.backlogged() ? 1 : 0);
        }
    }

    /** Backlogged flows now (tests and STATS). */
    int backlogged() {
        synchronized (lock) {
            return size;
        }
    }

    // ---- virtual time; callers hold the lock -----------------------------------------------------

    /** V up to NOW: it grows at R / (backlogged weight), and flows whose tag it passes leave the sum. */
    private void advance(long now) {
        if (!started) {
            started = true;
            serverNs = now;
            return;
        }
        if (now <= serverNs) {
            return;
        }
        long r = rate;
        long t = serverNs;
        while (size > 0 && r > 0) {
            Flow first = heap[0];
            double seconds = (first.leaves() - virtualTime) * backloggedWeight / r;
            long leaves = t + (long) Math.ceil(seconds * 1e9);
            if (leaves > now) {
                virtualTime += (now - t) / 1e9 * r / backloggedWeight;
                break;
            }
            virtualTime = Math.max(virtualTime, first.leaves());
            t = leaves;
            removeAt(0);
        }
        serverNs = now;
        if (size == 0) {
            // Nothing backlogged: V may start again from 0 (a flow not backlogged starts at V anyway),
            // which keeps its doubles small; tickets of the old epoch are past their start.
            virtualTime = 0;
            backloggedWeight = 0;
            epoch++;
        }
    }

    /** Until when FLOW's weighted packets wait for another flow's burst (NOW or earlier: they do not). */
    private long burstHold(Flow flow, long now) {
        Flow bursting = burstFlow;
        if (bursting == null || bursting == flow) {
            return now;
        }
        long end = Math.min(burstEndNs, Math.max(bursting.lastArrivalNs + BURST_QUIET_NS, burstFirstNs));
        if (end <= now) {
            burstFlow = null;
            return now;
        }
        return end;
    }

    /** When V reaches START, if the backlogged set stays as it is (a flow leaving only makes it sooner). */
    private long dueOf(double start, long now, long r) {
        if (start <= virtualTime) {
            return now;
        }
        double seconds = (start - virtualTime) * backloggedWeight / r;
        return Math.max(serverNs, now) + (long) Math.ceil(seconds * 1e9);
    }

    /**
     * What TICKET charged for its op's next packet becomes BYTES: the packet's real size, or 0 (a packet
     * served by its floor is not charged to its weight; a transfer that ended sends no more). Nothing to
     * do once V has passed the flow's tag (or started a new epoch): the charge is spent.
     */
    private void recharge(Flow flow, Ticket ticket, long bytes) {
        long charged = ticket.charged;
        ticket.charged = bytes;
        if (charged == 0 || charged == bytes || !flow.backlogged() || ticket.epoch != epoch || flow.weight <= 0) {
            return;
        }
        flow.finish += (bytes - charged) / flow.weight;
        if (flow.leaves() <= virtualTime) {
            remove(flow);
        } else if (bytes < charged) {
            siftUp(flow.heapIndex);
        } else {
            siftDown(flow.heapIndex);
        }
    }

    /** FLOW leaves the sum where its finish tag does. */
    private void unkeep(Flow flow) {
        if (!flow.backlogged() || flow.keep == 0) {
            return;
        }
        flow.keep = 0;
        if (flow.finish <= virtualTime) {
            remove(flow);
        } else {
            siftUp(flow.heapIndex);
        }
    }

    private static long nanos(long bytes, long rate) {
        return (long) Math.ceil(bytes * 1e9 / rate);
    }

    // ---- a binary min-heap of the backlogged flows by where they leave (Flow.leaves) ---------------

    private void push(Flow flow) {
        if (size == heap.length) {
            heap = java.util.Arrays.copyOf(heap, size * 2);  // grows with the number of users, not per packet
        }
        heap[size] = flow;
        flow.heapIndex = size++;
        backloggedWeight += flow.weight;
        siftUp(flow.heapIndex);
    }

    private void remove(Flow flow) {
        if (flow.backlogged()) {
            removeAt(flow.heapIndex);
        }
    }

    private void removeAt(int index) {
        Flow gone = heap[index];
        backloggedWeight -= gone.weight;
        gone.heapIndex = -1;
        Flow last = heap[--size];
        heap[size] = null;
        if (index < size) {
            heap[index] = last;
            last.heapIndex = index;
            siftDown(index);
            siftUp(last.heapIndex);
        }
        if (size == 0) {
            backloggedWeight = 0;
        }
    }

    private void siftUp(int index) {
        Flow flow = heap[index];
        while (index > 0) {
            int parent = (index - 1) >>> 1;
            if (heap[parent].leaves() <= flow.leaves()) {
                break;
            }
            place(heap[parent], index);
            index = parent;
        }
        place(flow, index);
    }

    private void siftDown(int index) {
        Flow flow = heap[index];
        while (true) {
            int child = 2 * index + 1;
            if (child >= size) {
                break;
            }
            if (child + 1 < size && heap[child + 1].leaves() < heap[child].leaves()) {
                child++;
            }
            if (flow.leaves() <= heap[child].leaves()) {
                break;
            }
            place(heap[child], index);
            index = child;
        }
        place(flow, index);
    }

    private void place(Flow flow, int index) {
        heap[index] = flow;
        flow.heapIndex = index;
    }
}
