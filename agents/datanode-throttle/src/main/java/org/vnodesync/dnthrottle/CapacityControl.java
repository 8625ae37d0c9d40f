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
 *       SATURATED): R = MARGIN of the most the flows moved in the last PEAK_INTERVALS, just under what
 *       the node delivers, whatever holds it (encryption, checksums, a disk); that level is remembered
 *       as safe, and R is held;</li>
 *   <li>held, R goes to MARGIN of what moved when, for LOWER_INTERVALS running with the node still
 *       saturated, the flows moved far less than R (the node slowed a lot: that is its new level), or
 *       two flows or more competed and hardly any packet waited for its weight (R is above what they
 *       get). Not on less: flows move less than R for reasons of their own too (readers between
 *       blocks, clients short of CPU);</li>
 *   <li>held below the safe level, R is probed back up towards it, sooner and in larger steps while
 *       probes hold: other work on the host that took the node for a while (and so lowered R) leaves
 *       no lasting mark. A probe followed by a lowering shows the node got slower: the safe level
 *       comes down to where the probe started. R is never probed above the safe level, where a split
 *       that looks right may tip over later;</li>
 *   <li>held ends once the busiest resource is below RELEASED (hysteresis: R held just under the node
 *       leaves its resources a little less busy): R then recovers quickly toward the configured
 *       capacity, and the next saturation sets a new safe level;</li>
 *   <li>next to nothing moved: R = the configured capacity (nothing to share).</li>
 * </ul>
 * Lending and reclaim never wait for this: it moves R only; the scheduler shares R at every packet.
 */
final class CapacityControl {
    static final double SATURATED = 0.90;
    static final double RELEASED = 0.80;
    static final double MARGIN = 0.95;
    /** Moved less than this fraction of R while saturated: the node slowed down. */
    static final double SLOWED = 0.80;
    static final int LOWER_INTERVALS = 5;
    /** Fewer packets than this waited for their weight while flows competed: R is not binding. */
    static final double UNHELD = 0.05;
    static final double RECOVER = 0.10;
    /** Below this fraction of the configured capacity a direction is taken as idle. */
    static final double ACTIVE = 0.02;
    /** R never goes below this fraction of the configured capacity. */
    static final double LOWEST = 0.05;
    static final int PEAK_INTERVALS = 5;
    static final int PROBE_INTERVALS = 20;
    static final int LEAST_PROBE_INTERVALS = 8;
    static final double FIRST_PROBE_STEP = 0.02;
    static final double LARGEST_PROBE_STEP = 0.32;
    /** Intervals after a probe within which a lowering counts against it. */
    static final int PROBE_ANSWER_INTERVALS = 8;

    /** What one interval of a direction showed. */
    record Seen(double movedBps, double busiest, double held, int competing) {
        static Seen of(WeightedScheduler.Interval interval, double seconds, double busiest) {
            return new Seen(interval.bytes() / seconds, busiest, interval.heldFraction(), interval.wholeFlows());
        }
    }

    private boolean held;
    private double safe;           // the highest R known to hold since saturation began
    private int lower;             // intervals running that asked for R lower
    private int slowedFor;         // ... of which because the node slowed
    private final double[] recent = new double[PEAK_INTERVALS];
    private int next;
    private int probeIn;
    private int probeWait;
    private double probeStep;
    private int sinceProbe = Integer.MAX_VALUE;
    private double beforeProbe;

    boolean held() {
        return held;
    }

    double safe() {
        return safe;
    }

    /** The next R (bytes/s) for a direction with capacity CONFIGURED and R now CURRENT, after SEEN. */
    long next(long configured, long current, Seen seen) {
        if (configured <= 0) {
            held = false;
            return 0;
        }
        double moved = seen.movedBps();
        if (current <= 0 || moved < ACTIVE * configured) {
            held = false;
            Arrays.fill(recent, 0);
            return configured;
        }
        recent[next] = moved;
        next = (next + 1) % recent.length;
        double rate;
        boolean saturated = seen.busiest() >= SATURATED;
        if (!held && saturated) {
            held = true;
            rate = safe = MARGIN * Arrays.stream(recent).max().orElse(moved);
            resetProbes();
        } else if (held && seen.busiest() >= RELEASED) {
            rate = heldStep(current, moved, saturated && moved < SLOWED * current,
                    saturated && seen.competing() >= 2 && seen.held() < UNHELD);
        } else {
            held = false;
            rate = current * (1 + RECOVER);
        }
        return Math.round(Math.max(LOWEST * configured, Math.min(configured, rate)));
    }

    private double heldStep(long current, double moved, boolean slowed, boolean unheld) {
        sinceProbe = sinceProbe == Integer.MAX_VALUE ? sinceProbe : sinceProbe + 1;
        slowedFor = slowed ? slowedFor + 1 : 0;
        lower = slowed || unheld ? lower + 1 : 0;
        if (lower >= LOWER_INTERVALS) {
            double rate = MARGIN * Math.min(current, moved);
            if (slowedFor >= LOWER_INTERVALS) {
                safe = rate;                           // the node is that much slower now: a new level
            } else if (sinceProbe <= PROBE_ANSWER_INTERVALS) {
                safe = Math.min(safe, beforeProbe);   // the probe found the node: it is no faster than that
            }
            resetProbes();
            return rate;
        }
        if (lower > 0 || current >= safe || --probeIn > 0) {
            return current;
        }
        beforeProbe = current;
        sinceProbe = 0;
        double probed = Math.min(safe, current * (1 + probeStep));
        probeStep = Math.min(LARGEST_PROBE_STEP, 2 * probeStep);
        probeWait = Math.max(LEAST_PROBE_INTERVALS, probeWait / 2);
        probeIn = probeWait;
        return probed;
    }

    private void resetProbes() {
        probeStep = FIRST_PROBE_STEP;
        probeWait = PROBE_INTERVALS;
        probeIn = PROBE_INTERVALS;
        sinceProbe = Integer.MAX_VALUE;
        lower = 0;
        slowedFor = 0;
    }
}
