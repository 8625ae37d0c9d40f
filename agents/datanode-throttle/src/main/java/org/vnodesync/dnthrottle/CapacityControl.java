package org.vnodesync.dnthrottle;

/**
 * Moves one direction's R (the rate the weights divide) to just under what the node actually delivers,
 * from samples some 100 ms apart. Weights hold only while R is somewhat below what the node can do: at
 * or above it the flows cannot keep up with their shares, drop out of the virtual time in turn, and the
 * split falls back to the node's own, 1:1 per connection (SchedulerTest shows both, and that ten
 * connections against one need a few per cent of slack). Like the vrate of Linux's iocost, R follows
 * the node while one of its resources (CPU, a data disk) is saturated, and goes back to the configured
 * capacity while none is:
 * <ul>
 *   <li>saturation begins (the busiest resource reaches SATURATED): R = MARGIN of the most the flows
 *       moved in the last PEAK_INTERVALS, just under what the node delivers, whatever held it
 *       (encryption, checksums, the disk);</li>
 *   <li>while saturated: R stays, unless the flows moved clearly less than R in two intervals running
 *       while the node stayed at SATURATED (it slowed further): then MARGIN of that again.
 *       Saturation ends only below RELEASED, so R held just under the node (which leaves its
 *       resources a little less busy) is not taken for room;</li>
 *   <li>not saturated: R recovers quickly toward the configured capacity;</li>
 *   <li>next to nothing moved: R = the configured capacity (nothing to share; a stale low R would
 *       hold back the next burst).</li>
 * </ul>
 * Lending and reclaim never wait for this: it moves R only; the scheduler shares R at every packet.
 */
final class CapacityControl {
    static final double SATURATED = 0.90;
    static final double RELEASED = 0.80;
    static final double MARGIN = 0.95;
    /** Moved less than this fraction of R while saturated: the node slowed down. */
    static final double SLOWED = 0.95;
    static final double RECOVER = 0.10;
    /** Below this fraction of the configured capacity a direction is taken as idle. */
    static final double ACTIVE = 0.02;
    /** R never goes below this fraction of the configured capacity. */
    static final double LOWEST = 0.05;
    /** Intervals over which the most moved is kept (one interval can be cut short by a start or a pause). */
    static final int PEAK_INTERVALS = 5;

    private boolean saturated;
    private boolean slowed;
    private final double[] recent = new double[PEAK_INTERVALS];
    private int next;

    boolean saturated() {
        return saturated;
    }

    /**
     * The next R (bytes/s) for a direction with capacity CONFIGURED and R now CURRENT, whose flows moved
     * MOVED_BPS over the last interval while the node's busiest resource was BUSIEST busy (0..1).
     */
    long next(long configured, long current, double movedBps, double busiest) {
        if (configured <= 0) {
            saturated = false;
            return 0;
        }
        if (current <= 0 || movedBps < ACTIVE * configured) {
            saturated = false;
            java.util.Arrays.fill(recent, 0);
            return configured;
        }
        recent[next] = movedBps;
        next = (next + 1) % recent.length;
        double rate = current;
        if (!saturated && busiest >= SATURATED) {
            saturated = true;
            rate = MARGIN * java.util.Arrays.stream(recent).max().orElse(movedBps);
        } else if (saturated && busiest < RELEASED) {
            saturated = false;
        } else if (saturated) {
            boolean shortOfRate = busiest >= SATURATED && movedBps < SLOWED * current;
            if (shortOfRate && slowed) {
                rate = MARGIN * movedBps;
            }
            slowed = shortOfRate;
        }
        if (!saturated) {
            rate = current * (1 + RECOVER);
        }
        return Math.round(Math.max(LOWEST * configured, Math.min(configured, rate)));
    }
}
