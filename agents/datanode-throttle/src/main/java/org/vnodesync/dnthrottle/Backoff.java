package org.vnodesync.dnthrottle;

/**
 * A wait, in capacity intervals, that doubles each time what it guards proved wrong (from LEAST up to
 * MOST) and ends early only by reset(): CapacityControl's room raises and SkewAnswer's lowerings.
 */
final class Backoff {
    private final int least;
    private final int most;
    private int length;            // the current wait; 0 before the first lengthen()
    private int left;              // intervals of it still to wait

    Backoff(int least, int most) {
        this.least = least;
        this.most = most;
    }

    /** What it guards was wrong again: wait twice as long as last time, from now. */
    void lengthen() {
        length = Math.min(most, Math.max(least, 2 * length));
        left = length;
    }

    /** What it guards proved right: the next wait starts from LEAST again. */
    void reset() {
        length = 0;
    }

    /** One interval that would act: true (and one less to wait) while the wait lasts. */
    boolean waiting() {
        if (left > 0) {
            left--;
            return true;
        }
        return false;
    }
}
