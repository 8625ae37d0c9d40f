package org.vnodesync.dnthrottle;

import java.util.Arrays;

/**
 * Moves one direction's R (the rate the weights divide) to just under what the node actually delivers,
 * once per interval (100 ms). Weights hold only while R is a little below what the node can do: at or
 * above it the flows cannot keep up with their shares, drop out of the virtual time in turn, nobody
 * waits for its weight any more, and the split falls back to the node's own, 1:1 per connection; a
 * little below it the split is right but can tip over later (SchedulerTest shows it; ten connections
 * against one need a few per cent of slack). Like the vrate of Linux's iocost:
 * <ul>
 *   <li>saturation begins (the busiest of the node's CPU and data disks, ResourceSampler, reaches
 *       SATURATED): R = MARGIN of what the flows moved over the last RECENT_INTERVALS (a mean: one
 *       interval's bytes come in bursts, from read-ahead or a full socket buffer; divided by the disk's
 *       busy fraction when a data disk is the busiest, so flows paced under the disk do not read as a
 *       slower disk; or the last interval's, up to R, if that is more: R was climbing and the flows
 *       kept up), just under what the node delivers, whatever holds it (encryption, checksums, a
 *       disk); that level is remembered as safe, and R is held. Begun by one flow alone, R keeps
 *       all but MARGIN of what it was (a transfer's first interval says little of the node) and the
 *       safe level waits for a second flow, as after a climb. Begun by flows that started less than
 *       YOUNG_INTERVALS ago, R and the safe level keep all but MARGIN of what R was: their first
 *       intervals say as little, and a level taken from them held two writers at half the node for
 *       3-6 s while they waited for it (measured; the rules below lower R if they do not wait);</li>
 *   <li>held, while fewer than two flows compete, the one alone is paced at R and shows only R: while
 *       it keeps up (KEEPS_UP of R, LONE_INTERVALS running) R climbs by CLIMB an interval, so a flow
 *       left alone gets what the node delivers now; when a second flow arrives R comes back to MARGIN
 *       of what the lone flow moved at the top (the safe level rises to it if it is higher): the
 *       newcomer meets R just under the node's speed, from its first packet (shared(), which the
 *       scheduler switches to as the second flow arrives). Unless the lone flow moved under SELF_HELD
 *       of R: then it was held by itself, and R stays;</li>
 *   <li>held, when two flows or more competed and hardly any packet waited for its weight, for
 *       LOWER_INTERVALS running (once past their first YOUNG_INTERVALS: starting, they wait for
 *       nothing), R is above what they get (the node slowed, or other work takes it):
 *       MARGIN of what moved, but never less than LOWER_MOST of R at a time (this and the next). Not on less: flows move less than R for reasons of their own too
 *       (readers between blocks, clients short of CPU), and each such lowering would stay;</li>
 *   <li>held, when the flows that kept sending did not share by weight (their bytes per weight
 *       SKEWED apart, smoothed; WeightedScheduler.Interval.skew; on a saturated CPU counting also the
 *       flows slow in flight, Seen.skewAnyPace), R is above what some of them can take (a transfer
 *       thread has one core to encrypt on; a disk slowed) and what they leave goes
 *       to the others: MARGIN of what moved, after LOWER_INTERVALS, or at once when LOPSIDED;</li>
 *   <li>held below the safe level, R is probed back up towards it, sooner and in larger steps while
 *       probes hold. A probe followed by a lowering shows the node got slower: the safe level comes
 *       down to where the probe started. R is not probed above the safe level, where a split that
 *       looks right may tip over later (a fraction of a per cent above the node is enough);</li>
 *   <li>held with the CPU saturated and the busiest resource, a safe level is trusted only for
 *       SAFE_LIFETIME to SAFE_MOST: other processes may have taken the CPU when it was found, and
 *       neither room nor release sees them go. Then R goes to the edge, and the first interval in
 *       which the flows stop waiting gives the new level (MARGIN of what moved since); flows that keep
 *       up there have the node back;</li>
 *   <li>held while the flows take all R lets through (FOLLOWS of it, smoothed) and yet the busiest
 *       resource stays under SATURATED for ROOM_INTERVALS (the utilization law: the node has room),
 *       R and the safe level rise by ROOM_STEP: the level was found while the node was slower (a
 *       JVM warming up, a moment's other work). As iocost raises its vrate while the device is not
 *       saturated and there is demand. Not while the flows are skewed; a rise answered by a
 *       lowering was no room (one thread per core leaves the node idle, not free), and the next
 *       waits twice as long;</li>
 *   <li>held ends once the busiest resource stays below RELEASED for RELEASE_INTERVALS (hysteresis: R
 *       held just under the node leaves its resources a little less busy, and writers changing blocks
 *       leave them idle for a moment): R then recovers quickly toward the configured capacity, and the
 *       next saturation sets a new safe level;</li>
 *   <li>writes: R is never lowered below MARGIN of what the data disks wrote (Seen.drainedBps): writers
 *       the kernel pauses while the disk flushes move little and wait for no weight;</li>
 *   <li>next to nothing moved: R = the configured capacity (nothing to share).</li>
 *   <li>held, R is never above MARGIN of the configured capacity: configured as what the node
 *       delivers, as it is meant to be, that is the edge itself.</li>
 * </ul>
 * Lending and reclaim never wait for this: it moves R only; the scheduler shares R at every packet.
 */
final class CapacityControl {
    /** Which rule moved (or kept) R last: shown in STATS, so an operator and a trace can tell why R is where it is. */
    enum Step {
        NONE, IDLE, RECOVERING, SATURATED, HELD, LOWERED_UNHELD, LOWERED_SKEWED, LOWERED_LOPSIDED, SKEW_UNDONE,
        ASKING_LOWER, ALONE, CLIMBING, SELF_HELD, SHARED, ROOM, PROBE, BEYOND, FOUND, DRAINED_FLOOR;

        /** As STATS shows it: lower case, dashes. */
        String label() {
            return name().toLowerCase(java.util.Locale.ROOT).replace('_', '-');
        }
    }

    static final double SATURATED = 0.90;
    static final double RELEASED = 0.60;
    static final double MARGIN = 0.95;
    /** Fewer packets than this waited for their weight while flows competed: R is not binding. */
    static final double UNHELD = 0.05;
    /**
     * Flows that kept sending moved bytes per weight this far apart (WeightedScheduler.Interval.skew):
     * some could not keep up with their shares of R (one thread per core, a disk slower than it was),
     * what they left went to the others, and the split leans to the node's own. R is too high.
     */
    static final double SKEWED = 1.08;
    static final double SKEW_SMOOTHING = 0.3;
    /** Skewed this far, R is lowered at once: it is well above what some flows can take. */
    static final double LOPSIDED = 1.25;
    static final int LOWER_INTERVALS = 5;
    /** A lowering keeps at least this much of R. */
    static final double LOWER_MOST = 0.5;
    static final double RECOVER = 0.10;
    /** Below this fraction of the configured capacity a direction is taken as idle. */
    static final double ACTIVE = 0.02;
    /** R never goes below this fraction of the configured capacity. */
    static final double LOWEST = 0.05;
    static final int RECENT_INTERVALS = 10;
    /** Flows active for fewer intervals than this are still starting (JVMs warming up, pipelines opening). */
    static final int YOUNG_INTERVALS = RECENT_INTERVALS;
    static final double BUSY_SMOOTHING = 0.2;
    /** Intervals under RELEASED before held ends (a write pipeline changing blocks idles the disk briefly). */
    static final int RELEASE_INTERVALS = 10;
    /** Under this a disk's busy fraction says too little to scale what moved by it. */
    static final double UTILIZATION_FLOOR = 0.5;
    static final int PROBE_INTERVALS = 20;
    static final int LEAST_PROBE_INTERVALS = 8;
    static final double FIRST_PROBE_STEP = 0.02;
    static final double LARGEST_PROBE_STEP = 0.32;
    /** A flow alone moving this much of R keeps up with it: R climbs by CLIMB. */
    static final double KEEPS_UP = 0.9;
    static final double CLIMB = 0.10;
    static final int LONE_INTERVALS = 3;
    /**
     * A flow alone moving under this share of R is held by itself (a client starting: two writers' JVMs
     * at 13-16 MB/s of 57), and a second flow meeting R at what it moved held both at a third under the
     * node for 3-6 s (measured). One held by the node moves near R (a reader behind its read-ahead, 80 %).
     */
    static final double SELF_HELD = 0.5;
    static final double LONE_SMOOTHING = 0.3;
    /** Flows that move this much of R take all it lets through. */
    static final double FOLLOWS = 0.97;
    static final double FOLLOW_SMOOTHING = 0.2;
    static final int ROOM_INTERVALS = 3;
    static final double ROOM_STEP = 0.05;
    /** Weighted service this even (Interval.skew) is what room may raise R from. */
    static final double EVEN = 1.05;
    /** The longest a room raise or a skew lowering that proved wrong waits to be tried again (Backoff). */
    static final int MOST_WAIT = 600;
    /** Intervals after a probe within which a lowering counts against it. */
    static final int PROBE_ANSWER_INTERVALS = 8;
    /**
     * Intervals a safe level found by measuring (saturation beginning, a probe's answer) is trusted
     * while the CPU is the saturated, busiest resource; longer (up to SAFE_MOST) after the node is
     * found no faster. /proc/stat counts every process: with others keeping the CPU busy, release and room are
     * blind, and a level found while they took it (two busy loops, a GC, a moment's other work) would
     * stay for good. SAFE_MOST bounds the recovery; each look costs an interval or two above the node.
     */
    static final int SAFE_LIFETIME = 20;
    static final int SAFE_MOST = 30;

    /**
     * What one interval of a direction showed. SKEW: over the flows whose packets moved about as fast in
     * flight (WeightedScheduler.Interval.skew); SKEW_ANY_PACE: over all that kept sending, which R goes
     * by while the CPU is what saturates the node (a flow's thread is then slow for want of the CPU
     * the others' threads take, and holding them gives it back). DRAINED_BPS: writes only, what the
     * data disks wrote meanwhile (0: not known), the least R is lowered to (see next()).
     */
    static final class Seen {
        private final double movedBps;
        private final double busiest;
        private final double held;
        private final int competing;
        private final double disk;
        private final double skew;
        private final double skewAnyPace;
        private final double drainedBps;

        Seen(double movedBps, double busiest, double held, int competing, double disk, double skew,
             double skewAnyPace, double drainedBps) {
            this.movedBps = movedBps;
            this.busiest = busiest;
            this.held = held;
            this.competing = competing;
            this.disk = disk;
            this.skew = skew;
            this.skewAnyPace = skewAnyPace;
            this.drainedBps = drainedBps;
        }

        double movedBps() {
            return movedBps;
        }

        double busiest() {
            return busiest;
        }

        double held() {
            return held;
        }

        int competing() {
            return competing;
        }

        double disk() {
            return disk;
        }

        double skew() {
            return skew;
        }

        double skewAnyPace() {
            return skewAnyPace;
        }

        double drainedBps() {
            return drainedBps;
        }

        Seen(double movedBps, double busiest, double held, int competing) {
            this(movedBps, busiest, held, competing, 0, 0, 0, 0);
        }

        Seen(double movedBps, double busiest, double held, int competing, double disk, double skew) {
            this(movedBps, busiest, held, competing, disk, skew, skew, 0);
        }

        Seen(double movedBps, double busiest, double held, int competing, double disk, double skew,
             double skewAnyPace) {
            this(movedBps, busiest, held, competing, disk, skew, skewAnyPace, 0);
        }

        /**
         * The same with only the skew R goes by where the CPU saturates (SKEW_ANY_PACE): elsewhere the
         * flows' pace is not the node's to even out.
         */
        Seen onlyCpuSkew() {
            return new Seen(movedBps, busiest, held, competing, disk, 0, skewAnyPace, drainedBps);
        }

        /** The same with the data disks having written DRAINED bytes/s. */
        Seen withDrained(double drained) {
            return new Seen(movedBps, busiest, held, competing, disk, skew, skewAnyPace, drained);
        }

        static Seen of(WeightedScheduler.Interval interval, double seconds, double cpu, double disk) {
            return new Seen(interval.bytes() / seconds, Math.max(cpu, disk), interval.heldFraction(),
                    interval.continuingFlows(), disk, interval.skew(), interval.skewAnyPace(), 0);
        }
    }

    private boolean held;
    private double busy;           // the busiest resource's busy fraction, smoothed
    private int idle;              // intervals running with it under RELEASED
    private double disk;           // the busiest data disk's, smoothed
    private double safe;           // the highest R known to hold since saturation began
    private final Backoff safeWait = new Backoff(SAFE_LIFETIME, SAFE_MOST);   // while the safe level is trusted
    private boolean beyond;        // R was put at the edge past a safe level no longer trusted
    private double beyondMoved;    // what moved since, summed
    private int lower;             // intervals running that asked for R lower
    private double loweredMoved;   // what moved over them
    private final double[] recent = new double[RECENT_INTERVALS];
    private final double[] recentDrained = new double[RECENT_INTERVALS];   // Seen.drainedBps, as `recent`
    private int filled;
    private int next;
    private int lone;              // intervals running with fewer than two flows
    private double loneMoved;      // what moved over them, smoothed
    private boolean climbed;       // R climbed over them
    private int probeIn;
    private int probeWait;
    private double probeStep;
    private int sinceProbe = Integer.MAX_VALUE;
    private double beforeProbe;
    private double follows;        // what moved over R, smoothed
    private int room;              // intervals running with flows taking all of R and room on the node
    private final Backoff roomWait = new Backoff(ROOM_INTERVALS, MOST_WAIT);   // after a raise a lowering answered
    private boolean roomAnswered;  // the last raise was for room (not a probe)
    private double skew = 1;       // Seen.skew, smoothed (1 with fewer than two flows to compare)
    private double skewSum;        // raw skew over the intervals that asked for R lower
    private final SkewAnswer answer = new SkewAnswer();
    private Step step = Step.NONE;
    private double seenSkew;       // the last interval's skew as R went by it (0: not known)

    Step step() {
        return step;
    }

    /** The flows' skew (Seen.skew), smoothed: 1 when even or with fewer than two to compare. */
    double skew() {
        return skew;
    }

    /** The last interval's skew, of the two Seen gives the one R went by (0: fewer than two flows to compare). */
    double seenSkew() {
        return seenSkew;
    }

    boolean held() {
        return held;
    }

    double safe() {
        return safe;
    }

    /**
     * R for when a second flow arrives, given R is NEXT: while a flow alone has climbed, what the
     * climb's end would give (MARGIN of what it moved, not under the safe level); else NEXT.
     */
    long shared(long next) {
        return climbed && !selfHeld(next) ? Math.min(next, Math.round(Math.max(safe, MARGIN * loneMoved))) : next;
    }

    /** The next R (bytes/s) for a direction with capacity CONFIGURED and R now CURRENT, after SEEN. */
    long next(long configured, long current, Seen seen) {
        seenSkew = 0;
        if (configured <= 0) {
            held = false;
            step = Step.NONE;
            return 0;
        }
        double moved = seen.movedBps();
        if (current <= 0 || moved < ACTIVE * configured) {
            held = false;
            Arrays.fill(recent, 0);
            Arrays.fill(recentDrained, 0);
            filled = 0;
            next = 0;
            step = Step.IDLE;
            return configured;
        }
        recent[next] = moved;
        recentDrained[next] = seen.drainedBps();
        next = (next + 1) % recent.length;
        filled = Math.min(recent.length, filled + 1);
        double mean = Arrays.stream(recent).sum() / filled;   // as estimate of what the node delivers
        double drained = Arrays.stream(recentDrained).sum() / filled;
        // Busy fractions of 100 ms swing with bursty I/O (0.3 and 1.0 in turn on a disk that is kept
        // just under its speed): decisions follow a smoothed one.
        busy = filled == 1 ? seen.busiest() : busy + BUSY_SMOOTHING * (seen.busiest() - busy);
        disk = filled == 1 ? seen.disk() : disk + BUSY_SMOOTHING * (seen.disk() - disk);
        if (disk >= busy - 0.01 && disk >= UTILIZATION_FLOOR) {
            // A data disk holds the node: what it could move is what it moved over how busy it was
            // (the utilization law), so R paced under the disk does not read as the disk slowing down.
            mean /= disk;
        }
        double rate;
        if (!held && busy >= SATURATED) {
            // What the node does now: the recent mean, or this interval's if R was recovering and the
            // flows kept up with it (the mean would still hold the climb's lower values).
            held = true;
            step = Step.SATURATED;
            rate = safe = MARGIN * Math.max(mean, Math.min(current, moved));
            safeWait.lengthen();
            resetProbes();
            follows = 0;
            if (seen.competing() < 2) {
                // One flow: nothing to share yet, and its first interval (a transfer starting, a
                // client warming up) says little of the node. It keeps R but the margin; a second
                // flow meets R just under what the lone one moved (shared()), as after a climb.
                rate = MARGIN * current;
                climbed = true;
                lone = 1;
                loneMoved = moved;
            } else if (filled < YOUNG_INTERVALS) {
                rate = safe = MARGIN * current;
            }
        } else if (held && (busy >= RELEASED || ++idle < RELEASE_INTERVALS)) {
            if (busy >= RELEASED) {
                idle = 0;
            }
            rate = heldStep(configured, current, moved, mean, seen);
        } else {
            held = false;
            idle = 0;
            step = Step.RECOVERING;
            rate = current * (1 + RECOVER);
        }
        // Writes: never lowered below MARGIN of what the data disks wrote. Writers paused by the kernel
        // (the device's dirty page cache at its limit while the disk flushes) move little and wait for
        // no weight, which reads as R above the node; taken down to what they moved, R was 10 MB/s on a
        // disk writing 60 and took 8 s to climb back (measured, bob's writes back beside alice's).
        if (rate < Math.min(current, MARGIN * drained)) {
            rate = Math.min(current, MARGIN * drained);
            step = Step.DRAINED_FLOOR;
        }
        // Held, R stays MARGIN under the configured capacity too: configured as what the node delivers
        // (as it is meant to be), it is the edge where the split tips over.
        double most = held ? MARGIN * configured : configured;
        return Math.round(Math.max(LOWEST * configured, Math.min(most, rate)));
    }

    private double heldStep(long configured, long current, double moved, double mean, Seen seen) {
        step = Step.HELD;
        sinceProbe = sinceProbe == Integer.MAX_VALUE ? sinceProbe : sinceProbe + 1;
        boolean fresh = safeWait.waiting();
        boolean cpuSaturated = busy >= SATURATED && cpuBound();   // room is blind then
        double observed = cpuSaturated ? seen.skewAnyPace() : seen.skew();
        seenSkew = observed;
        // Flows still starting (fewer than YOUNG_INTERVALS) move less than R for reasons of their own.
        boolean unheld = filled >= YOUNG_INTERVALS && busy >= SATURATED && seen.competing() >= 2
                && seen.held() < UNHELD;
        if (beyond) {
            beyondMoved += moved;
            if (seen.competing() < 2) {
                safeWait.lengthen();   // no answer from a flow alone: back where R held, to look later
                resetProbes();
                step = Step.ALONE;
                return beforeProbe;
            }
            if (unheld || observed >= LOPSIDED) {
                // The flows stopped waiting (or some could not keep up): what they moved since is what
                // the node delivers now. The first such interval answers: each one tips the split.
                double found = MARGIN * Math.min(current, beyondMoved / sinceProbe);
                if (found > beforeProbe * (1 + FIRST_PROBE_STEP)) {
                    safeWait.reset();   // faster than the old level: the next look comes soon again
                }
                safeWait.lengthen();
                safe = found;
                resetProbes();
                step = Step.FOUND;
                return found;
            }
            if (sinceProbe > PROBE_ANSWER_INTERVALS) {
                safe = Math.max(safe, current);   // the node keeps up at the edge again
                safeWait.reset();
                beyond = false;
            }
        }
        if (roomAnswered && sinceProbe > PROBE_ANSWER_INTERVALS) {
            roomAnswered = false;
            roomWait.reset();   // the raise held: the next waits the least again, not ever longer
        }
        double raw = observed == 0 ? 1 : observed;
        skew += SKEW_SMOOTHING * (raw - skew);
        if (answer.pending()) {
            double back = answer.judge(raw);
            if (back > 0) {
                // Lowering R did not even the split out: the skew is not R's to fix (a write pipeline
                // paced by its other nodes). R goes back, and skew lowers it again only after a wait.
                safe = Math.max(safe, back);
                resetProbes();
                skew = 1;
                step = Step.SKEW_UNDONE;
                return back;
            }
        }
        boolean byWeight = answer.mayLower();
        boolean skewed = byWeight && skew >= SKEWED;
        boolean lopsided = byWeight && skew >= LOPSIDED;
        lower = unheld || skewed || lopsided ? lower + 1 : 0;
        loweredMoved = lower == 1 ? moved : loweredMoved + moved;
        skewSum = lower == 1 ? raw : skewSum + raw;
        if (lower >= LOWER_INTERVALS || lopsided) {
            if (sinceProbe <= PROBE_ANSWER_INTERVALS) {
                safe = Math.min(safe, beforeProbe);   // the probe found the node: it is no faster than that
                safeWait.lengthen();                  // (for now: others may have taken the CPU)
                if (roomAnswered) {
                    roomWait.lengthen();
                }
            }
            roomAnswered = false;
            double over = loweredMoved / lower;
            double skewBefore = lopsided ? raw : skewSum / lower;
            resetProbes();
            // What they moved over those intervals, not the last one's: a write pipeline changing
            // blocks stalls for a moment. Lopsided, at once: the last ones' (the skew is smoothed).
            skew = lopsided ? 1 : skew;
            if (!unheld) {
                answer.lowered(current, skewBefore);
            }
            step = lopsided ? Step.LOWERED_LOPSIDED : unheld ? Step.LOWERED_UNHELD : Step.LOWERED_SKEWED;
            // At most halved at a time: a write pipeline between blocks, or a disk flushing what was
            // written before, can leave flows moving next to nothing for a moment without waiting for
            // their weights, and R taken down to that stayed low for seconds after they were back
            // (seen on the testbed: 55 -> 5.5 MB/s). A node that did slow down is reached in steps.
            return Math.max(MARGIN * Math.min(current, over), LOWER_MOST * current);
        }
        if (lower > 0) {
            step = Step.ASKING_LOWER;
            return current;
        }
        if (seen.competing() < 2) {
            return aloneStep(current, moved);
        }
        lone = 0;
        if (climbed && selfHeld(current)) {
            // The flow alone moved far under R: held by itself (a client starting), it said nothing of the
            // node. R stays, and the rules above lower it if the flows do not wait there.
            climbed = false;
            safe = Math.max(safe, current);
            resetProbes();
            step = Step.SELF_HELD;
            return current;
        }
        if (climbed) {
            // Competition again after a flow alone climbed: R back to just under what it moved at the
            // top (what the node delivers, or what the flow could take; never under the safe level).
            climbed = false;
            safe = Math.max(safe, MARGIN * loneMoved);
            resetProbes();
            step = Step.SHARED;
            return Math.min(current, safe);
        }
        follows += FOLLOW_SMOOTHING * (Math.min(1.5, moved / current) - follows);
        boolean roomy = follows >= FOLLOWS && busy < SATURATED && skew < EVEN && !roomWait.waiting();
        room = roomy ? room + 1 : 0;
        if (room >= ROOM_INTERVALS) {
            room = 0;
            safe = Math.max(safe, current * (1 + ROOM_STEP));
            resetProbes();
            // Answered like a probe: flows that then cannot keep up bring the safe level back down,
            // and the next such step waits twice as long (the node's room was in one thread's core).
            beforeProbe = current;
            sinceProbe = 0;
            roomAnswered = true;
            step = Step.ROOM;
            return current * (1 + ROOM_STEP);
        }
        if (current >= safe - 1 && !fresh && cpuSaturated && current < MARGIN * configured) {
            // At a safe level no longer trusted: R to the edge, and what the node then moves is the new
            // level (a ladder of probes would take seconds more to climb back from half).
            beforeProbe = current;
            sinceProbe = 0;
            roomAnswered = false;
            beyond = true;
            beyondMoved = 0;
            step = Step.BEYOND;
            return MARGIN * configured;
        }
        if (current >= safe || --probeIn > 0) {
            return current;
        }
        beforeProbe = current;
        sinceProbe = 0;
        double probed = Math.min(safe, current * (1 + probeStep));
        probeStep = Math.min(LARGEST_PROBE_STEP, 2 * probeStep);
        probeWait = Math.max(LEAST_PROBE_INTERVALS, probeWait / 2);
        probeIn = probeWait;
        step = Step.PROBE;
        return probed;
    }

    /**
     * One flow alone (or none whole): it is paced at R, so what it moves shows only R. While it keeps
     * up with R, R climbs (CLIMB a step, never past 1/KEEPS_UP of what moved) to find what the node
     * delivers now; once it stops keeping up R stays. Probes wait.
     */
    private double aloneStep(long current, double moved) {
        step = Step.ALONE;
        loneMoved = lone++ == 0 ? moved : loneMoved + LONE_SMOOTHING * (moved - loneMoved);
        if (lone >= LONE_INTERVALS && moved >= KEEPS_UP * current) {
            climbed = true;
            step = Step.CLIMBING;
            return Math.max(current, Math.min(current * (1 + CLIMB), moved / KEEPS_UP));
        }
        return current;
    }

    /** The CPU, not a data disk, is the busiest resource. */
    private boolean cpuBound() {
        return disk < busy - 0.01;
    }

    /** The flow alone moved under SELF_HELD of R (RATE): held by itself, not by the node. */
    private boolean selfHeld(double rate) {
        return loneMoved < SELF_HELD * rate;
    }

    private void resetProbes() {
        beyond = false;
        probeStep = FIRST_PROBE_STEP;
        probeWait = PROBE_INTERVALS;
        probeIn = PROBE_INTERVALS;
        sinceProbe = Integer.MAX_VALUE;
        lower = 0;
    }
}
