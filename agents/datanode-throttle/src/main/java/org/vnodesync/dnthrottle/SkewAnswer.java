package org.vnodesync.dnthrottle;

/**
 * Whether lowering R for a skewed split (CapacityControl) evened it out. It does when some flows could
 * not keep up with their shares of R; it does not when what holds them is outside the node (a write
 * pipeline moves at the pace of its slowest node and of its client), and then each lowering would
 * only cost the node's throughput. A lowering that did not help is undone, and skew may lower R again
 * only after a wait that doubles each time (Backoff), as room's does.
 */
final class SkewAnswer {
    /** Intervals after a lowering over which the split is judged. */
    static final int JUDGE_INTERVALS = 5;
    /** The mean skew must come down this much (or under SKEWED) for the lowering to count as a help. */
    static final double IMPROVED = 0.02;
    static final int LEAST_WAIT = 20;

    private int judgeIn;           // intervals left to judge the last lowering (0: none pending)
    private double from;           // R before it
    private double before;         // the mean skew that asked for it
    private double sum;            // skew since
    private int count;
    private final Backoff wait = new Backoff(LEAST_WAIT, CapacityControl.MOST_WAIT);

    boolean pending() {
        return judgeIn > 0;
    }

    /** Skew may lower R now (not while a lowering is judged, nor during a wait). */
    boolean mayLower() {
        return !wait.waiting() && judgeIn == 0;
    }

    /** R was lowered from FROM for a mean skew of BEFORE. */
    void lowered(double from, double before) {
        this.from = from;
        this.before = before;
        judgeIn = JUDGE_INTERVALS;
        sum = 0;
        count = 0;
    }

    /** One interval's SKEW while judged; the R to go back to if the lowering did not help, else 0. */
    double judge(double skew) {
        sum += skew;
        count++;
        if (--judgeIn > 0) {
            return 0;
        }
        double after = sum / count;
        if (after >= CapacityControl.SKEWED && after > before - IMPROVED) {
            wait.lengthen();
            return from;
        }
        wait.reset();
        return 0;
    }
}
