package org.vnodesync.dnthrottle;

import java.util.concurrent.atomic.AtomicLongArray;

/**
 * Per rule of CapacityControl (Step), how long it held R and how many times it moved R, since the
 * DataNode started: STATS' STEP lines, so an operator sees which rule lowered R even where a scrape
 * only ever catches the rule that kept it afterwards. Written by the capacity loop, read by STATS.
 */
final class StepTally {
    private static final int STEPS = CapacityControl.Step.values().length;
    private final AtomicLongArray nanos = new AtomicLongArray(STEPS);
    private final AtomicLongArray moves = new AtomicLongArray(STEPS);

    /** STEP set R (from BEFORE to AFTER) for the last NANOS. */
    void add(CapacityControl.Step step, long nanos, long before, long after) {
        this.nanos.addAndGet(step.ordinal(), Math.max(0, nanos));
        if (after != before) {
            moves.incrementAndGet(step.ordinal());
        }
    }

    long nanos(CapacityControl.Step step) {
        return nanos.get(step.ordinal());
    }

    long moves(CapacityControl.Step step) {
        return moves.get(step.ordinal());
    }

    /** STATS' lines for DIRECTION: one per step that ever held R, in the enum's order. */
    String lines(String direction) {
        StringBuilder out = new StringBuilder();
        for (CapacityControl.Step step : CapacityControl.Step.values()) {
            long held = nanos(step);
            long moved = moves(step);
            if (held > 0 || moved > 0) {
                out.append(String.format(java.util.Locale.ROOT, "STEP direction=%s step=%s seconds=%.3f moves=%d%n",
                        direction, step.label(), held / 1e9, moved));
            }
        }
        return out.toString();
    }
}
