package org.vnodesync.dnthrottle;

/**
 * How many packets one volume keeps in flight: the least depth at which its throughput stops rising
 * (docs/edge.md, "Depth"). No capacity figure: each interval's bytes are what the volume really
 * moved, and the depth is found by trying one more and one fewer, as BBR probes a path's bandwidth.
 *
 * <p>By Little's law a resource that is not saturated moves about D/(D+1) as much at depth D as at
 * D+1, and a saturated one the same at both. A probe is judged halfway between the two, against the
 * binding interval just before it: one packet more is kept if it moved more than 1/(2D) more, one
 * fewer if it lost less than 1/(2D). Adjacent intervals see nearly the same mix of users, so what
 * differs between them is mostly the depth. So a disk that one sequential reader keeps busy settles
 * at 1 (the depth at which weights hold even with one thread per user), two CPU-bound cores at 2, a
 * slow client holding a packet as deep as keeps the volume busy beside it; a gain under the halfway
 * mark (an HDD's elevator, a packet's own send between two reads) is left for the weights. A depth
 * costs the weights only where users share the volume: while one user alone moves there, one packet
 * more is kept for any gain of at least ALONE_WORTH (so a lone user on an HDD has its elevator). Only
 * intervals in which the depth bound (packets waited for a slot most of the time) say anything about
 * it; in the others it is cut to what was used.
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
     * The least gain a packet more must bring while one user alone moves at the volume: the node's
     * throughput target (within 5 % of no vnode-sync, issue 58); with no one to share with, depth
     * costs nothing else.
     */
    static final double ALONE_WORTH = 0.05;

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
     * One interval is over: it moved BPS, its queue was non-empty most of it (BINDING), at most PEAK
     * packets were in flight at once, and SHARERS users had packets dispatched. Returns the depth for
     * the next interval.
     */
    int interval(double bps, boolean binding, int peak, int sharers) {
        if (phase != Phase.STEADY) {
            // Judged whether or not anyone waited: a depth that lets every thread go shows it by its
            // throughput alone (two CPU-bound threads on two cores).
            // shared: at the halfway mark of the depth D before the probe, 1/(2D)
            double worth = sharers <= 1 ? ALONE_WORTH : 0.5 / (phase == Phase.PROBING_UP ? depth - 1 : depth + 1);
            boolean keep = phase == Phase.PROBING_UP
                    ? bps > probedLevel * (1 + worth)
                    : bps >= probedLevel * (1 - worth);
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
