package org.vnodesync.dnthrottle;

/**
 * How many packets one volume keeps in flight: the least depth at which its throughput stops rising
 * (docs/edge.md, "Depth"). No capacity figure: each interval's bytes are what the volume really
 * moved, and the depth is found by trying one more and one fewer, as BBR probes a path's bandwidth.
 *
 * <p>By Little's law a resource that is not saturated moves about D/(D+1) as much at depth D as at
 * D+1, and a saturated one the same at both. A probe is judged halfway between the two: one packet
 * more is kept if it moved more than 1/(2D) above the best interval since the last probe (a deeper
 * queue costs the weights, so it must beat the noise of every interval, not their mean); one fewer is
 * kept if it lost less than 1/(2D) of their mean.
 * So a disk that one sequential reader keeps busy settles at 1 (the depth at which weights hold
 * even with one thread per user), two CPU-bound cores at 2, a disk that reorders a deeper queue
 * deeper. A depth exists to order users: in an interval in which at most one user moved at the
 * volume the dispatcher bounds nothing (Dispatcher.alone), and the interval says nothing about the
 * depth, which is left as it was (probes included) for when users share again. Of the other
 * intervals, only those in which the depth bound (packets waited for a slot most of the time) say
 * anything about it; the rest leave it as it was too, and a depth deeper than a new load needs is
 * found by the next probe down.
 *
 * <p>Not thread-safe: its dispatcher calls it under its own lock.
 */
final class Depth {
    /**
     * Binding intervals between probes (10 x 100 ms), doubled after each probe that did not move the
     * depth up to LEAST_PROBED (30 s): a probe costs one interval at a worse depth, so a settled volume
     * pays for it less and less. A level (the mean since the last probe, once it spans PROBE_EVERY
     * intervals) that moved from the last probe's by more than a probe's threshold means the load
     * changed: the next probe comes at once and the wait starts again from PROBE_EVERY.
     */
    static final int PROBE_EVERY = 10;
    static final int LEAST_PROBED = 300;

    enum Phase { STEADY, PROBING_UP, PROBING_DOWN }

    private int depth = 1;
    private Phase phase = Phase.STEADY;
    private boolean nextProbeUp = true;
    private int bindingSince;          // binding intervals since the last probe
    private int probeEvery = PROBE_EVERY;
    private double probedLevel;        // the level when the last probe began
    private double sum;                // bytes/s of the binding intervals since the last probe, summed...
    private int count;                 // ...over this many: their mean is the level at the current depth
    private double best;               // the most a binding interval moved since the last probe
    private long probes;
    private long moves;

    int depth() {
        return depth;
    }

    Phase phase() {
        return phase;
    }

    /** The mean bytes/s of the binding intervals at the current depth since the last probe (0: none yet). */
    private double level() {
        return count == 0 ? 0 : sum / count;
    }

    /** After a probe: the next level starts from BPS (the probe's interval at a depth it kept), or from nothing. */
    private void startLevel(double bps) {
        sum = bps;
        count = bps > 0 ? 1 : 0;
    }

    long probes() {
        return probes;
    }

    long moves() {
        return moves;
    }

    /**
     * One interval is over: it moved BPS, its queue was non-empty most of it (BINDING), and SHARERS
     * users had packets there (waiting, dispatched or in flight). Returns the depth for the next interval.
     */
    int interval(double bps, boolean binding, int sharers) {
        if (sharers <= 1) {
            return depth;   // nobody to order, and nothing bound: the depth waits for users who share
        }
        switch (phase) {
            case PROBING_UP:
                // Judged whether or not anyone waited: a depth that lets every thread go shows it by
                // its throughput alone (two CPU-bound threads on two cores).
                if (best > 0 && bps > best * (1 + 0.5 / (depth - 1))) {
                    moves++;
                    startLevel(bps);  // the new depth's level: this interval so far
                    probeEvery = PROBE_EVERY;
                } else {
                    depth--;
                    startLevel(0);
                    probeEvery = Math.min(LEAST_PROBED, 2 * probeEvery);
                }
                phase = Phase.STEADY;
                best = 0;
                return depth;
            case PROBING_DOWN:
                if (count > 0 && bps >= level() * (1 - 0.5 / (depth + 1))) {
                    moves++;
                    startLevel(bps);
                    probeEvery = PROBE_EVERY;
                } else {
                    depth++;
                    startLevel(0);
                    probeEvery = Math.min(LEAST_PROBED, 2 * probeEvery);
                }
                phase = Phase.STEADY;
                best = 0;
                return depth;
            default:
                if (!binding) {
                    // The depth held nobody back: nothing learnt about it, so it is left as it was (as after
                    // an interval alone). Cutting it to what was in flight cost CPU-bound volumes a second
                    // or more at depth 1 after each pause in the load, until a probe found the cores again
                    // (docs/edge.md section 3).
                    return depth;
                }
                sum += bps;
                count++;
                best = Math.max(best, bps);
                if (probedLevel > 0 && count >= PROBE_EVERY
                        && Math.abs(level() - probedLevel) > probedLevel * 0.5 / depth) {
                    probeEvery = PROBE_EVERY;   // the load changed: what the last probes found may not hold
                }
                if (++bindingSince < probeEvery) {
                    return depth;
                }
                bindingSince = 0;
                probedLevel = level();
                probes++;
                boolean up = nextProbeUp || depth == 1;
                nextProbeUp = !up;
                phase = up ? Phase.PROBING_UP : Phase.PROBING_DOWN;
                depth += up ? 1 : -1;
                return depth;
        }
    }
}
