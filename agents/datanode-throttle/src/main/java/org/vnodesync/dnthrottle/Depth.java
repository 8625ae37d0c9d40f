package org.vnodesync.dnthrottle;

/**
 * How many packets one volume keeps in flight: the least depth beyond which one packet more is not
 * worth it (docs/edge.md, "Depth"). No capacity figure: each interval's bytes are what the volume
 * really moved, and the depth is found by trying one more and one fewer, as BBR probes a path's
 * bandwidth.
 *
 * <p>A probe is a paired comparison: the binding interval just before it, at the current depth,
 * against the interval at the probed depth. One packet more is kept if it moved at least WORTH more;
 * one fewer is kept if it lost less than WORTH. Adjacent intervals see nearly the same mix of users,
 * so what differs between them is mostly the depth (longer windows, median of 2 or 3 intervals, did
 * no better on the drawn scenarios: benchmarks/results/edge/model-scenarios.txt). So a disk that one
 * sequential reader keeps busy settles at 1 (the depth at which weights hold even with one thread
 * per user), two CPU-bound cores at 2, a disk that reorders a deeper queue where its gain flattens,
 * a slow client holding a packet as deep as keeps the volume busy beside it. Only intervals in which
 * the depth bound (packets waited for a slot most of the time) say anything about it; in the others
 * it is cut to what was used.
 *
 * <p>Not thread-safe: its dispatcher calls it under its own lock.
 */
final class Depth {
    /**
     * Binding intervals between probes (10 x 100 ms), doubled after each probe that did not move the
     * depth up to LEAST_PROBED (30 s): a probe costs an interval at a worse depth, so a settled volume
     * pays for it less and less. A level that moves by more than a packet's worth at an unsaturated
     * resource (1/(2D) by Little's law: the load changed) starts again from PROBE_EVERY.
     */
    static final int PROBE_EVERY = 10;
    static final int LEAST_PROBED = 300;
    /**
     * The least gain a packet more must bring, and the most loss a packet fewer may cost: the node's
     * throughput target (within 5 % of no QoS at all, issue 58). A deeper queue costs the weights
     * (a user with fewer threads than its share of the depth cannot use its share), so it is only
     * paid for throughput the target counts.
     */
    static final double WORTH = 0.05;

    enum Phase { STEADY, PROBING_UP, PROBING_DOWN }

    private int depth = 1;
    private Phase phase = Phase.STEADY;
    private boolean nextProbeUp = true;
    private int bindingSince;          // binding intervals since the last probe
    private int probeEvery = PROBE_EVERY;
    private double level;              // bytes/s of the last binding interval at this depth (0: none yet)
    private double probedLevel;        // the level when the last probe began
    private long probes;
    private long moves;

    int depth() {
        return depth;
    }

    Phase phase() {
        return phase;
    }

    double level() {
        return level;
    }

    long probes() {
        return probes;
    }

    long moves() {
        return moves;
    }

    /**
     * One interval is over: it moved BPS, its queue was non-empty most of it (BINDING), and at most
     * PEAK packets were in flight at once. Returns the depth for the next interval.
     */
    int interval(double bps, boolean binding, int peak) {
        if (phase != Phase.STEADY) {
            // Judged whether or not anyone waited: a depth that lets every thread go shows it by its
            // throughput alone (two CPU-bound threads on two cores).
            boolean keep = phase == Phase.PROBING_UP
                    ? bps >= probedLevel * (1 + WORTH)
                    : bps > probedLevel * (1 - WORTH);
            if (keep) {
                moves++;
                probeEvery = PROBE_EVERY;
                level = bps;
                probedLevel = bps;
            } else {
                depth += phase == Phase.PROBING_UP ? -1 : 1;
                probeEvery = Math.min(LEAST_PROBED, 2 * probeEvery);
            }
            phase = Phase.STEADY;
            return depth;
        }
        if (!binding) {
            // The depth held nobody back: nothing learnt about it, and a depth above what was used
            // would let the next contention in unordered.
            int used = Math.max(1, Math.min(depth, peak));
            if (used != depth) {
                depth = used;
                level = 0;
            }
            return depth;
        }
        level = bps;
        if (probedLevel > 0 && Math.abs(level - probedLevel) > probedLevel * 0.5 / depth) {
            probeEvery = PROBE_EVERY;   // the load changed: what the last probes found may not hold
        }
        if (++bindingSince < probeEvery) {
            return depth;
        }
        bindingSince = 0;
        probedLevel = level;
        probes++;
        boolean up = nextProbeUp || depth == 1;
        nextProbeUp = !up;
        phase = up ? Phase.PROBING_UP : Phase.PROBING_DOWN;
        depth += up ? 1 : -1;
        return depth;
    }
}
