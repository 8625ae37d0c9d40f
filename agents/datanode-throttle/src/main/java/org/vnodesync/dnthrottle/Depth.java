package org.vnodesync.dnthrottle;

import java.util.HashMap;
import java.util.Map;

/**
 * How many packets one volume keeps in flight: the least depth from which one packet more no longer
 * moves more than the node's throughput target lets it lose (docs/edge.md, "Depth"). No capacity
 * figure: each interval's bytes are what the volume really moved, and the depth is found by trying
 * one more and one fewer for an interval, as BBR probes a path's bandwidth.
 *
 * <p>A deeper queue costs the weights (a user with fewer threads than its share of the depth cannot
 * use its share), a shallower one costs throughput. Issue 58's target says how much throughput the
 * weights may cost: TARGET_LOSS (5 %) of what the node moves with no vnode-sync. So one packet more is
 * kept if its interval moved more than TARGET_LOSS above the mean of the binding intervals at the current
 * depth since the last probe, by more than Z_SCORE standard errors (the noise measured between those
 * intervals); one fewer is kept if it lost less than TARGET_LOSS of that mean. A probe is one
 * interval, not several: while it lasts a user with one thread has one slot of the deeper depth, half
 * the volume where it had all of it (a returning reader's transfer, DispatcherTest). Where the noise
 * leaves a gain open, the shallower depth wins: the weights. So a disk that one sequential reader keeps busy settles at 1, CPU-bound
 * cores at their number (even where the clients share them and a core more gains less than Little's
 * law's D/(D+1) predicts), a disk that reorders a deeper queue deeper while it gains over 5 %.
 *
 * <p>A depth exists to order users: in an interval in which at most one user moved at the volume the
 * dispatcher bounds nothing (Dispatcher.alone), and the interval says nothing about the depth, which
 * is left as it was (probes included) for when users share again. Of the other intervals, only those
 * in which the depth bound (packets waited for a slot most of the time) say anything about it; the
 * rest leave it as it was too, and a depth deeper than a new load needs is found by the next probe down.
 *
 * <p>Not thread-safe: its dispatcher calls it under its own lock.
 */
final class Depth {
    /**
     * Binding intervals between probes (10 x 100 ms), doubled after each probe that did not move the
     * depth up to LEAST_PROBED (30 s): a probe costs one interval at a worse depth, so a settled
     * volume pays for it less and less. A level (the mean since the last probe, once it spans
     * PROBE_EVERY intervals) that moved from the last probe's beyond the target and the noise means the
     * load changed: the next probe comes at once and the wait starts again from PROBE_EVERY.
     */
    static final int PROBE_EVERY = 10;
    static final int LEAST_PROBED = 300;
    /** The throughput the weights may cost: issue 58's node target (95 % of no vnode-sync's). */
    static final double TARGET_LOSS = 0.05;
    /** Standard errors a difference must clear: a depth is moved on noise alone about once in 40 probes (one-sided). */
    static final double Z_SCORE = 2.0;

    enum Phase { STEADY, PROBING_UP, PROBING_DOWN }

    /** Bytes/s of some intervals: their mean and spread (Welford's running sums). */
    static final class Samples {
        private int count;
        private double mean;
        private double squares;   // sum of squared deviations from the mean

        void add(double bps) {
            count++;
            double delta = bps - mean;
            mean += delta / count;
            squares += delta * (bps - mean);
        }

        void clear() {
            count = 0;
            mean = 0;
            squares = 0;
        }

        void copy(Samples other) {
            count = other.count;
            mean = other.mean;
            squares = other.squares;
        }

        int count() {
            return count;
        }

        double mean() {
            return mean;
        }

        /** One interval's spread about the mean (0 below two intervals). */
        double deviation() {
            return count < 2 ? 0 : Math.sqrt(squares / (count - 1));
        }

        /** The standard error of one more interval's bytes/s less this mean, if the load is the same. */
        double errorAgainstOne() {
            return deviation() * Math.sqrt(1 + 1.0 / Math.max(1, count));
        }

        /** The standard error of OTHER's mean less this one's, if the load is the same (their spread pooled). */
        double errorAgainst(Samples other) {
            int freedom = count + other.count - 2;
            if (count == 0 || other.count == 0 || freedom <= 0) {
                return 0;
            }
            return Math.sqrt((squares + other.squares) / freedom * (1.0 / count + 1.0 / other.count));
        }
    }

    private int depth = 1;
    private Phase phase = Phase.STEADY;
    private boolean nextProbeUp = true;
    private int bindingSince;          // binding intervals since the last probe
    private int probeEvery = PROBE_EVERY;
    private final Samples level = new Samples();    // the binding intervals at the current depth since the last probe
    private final Map<Object, Samples> users = new HashMap<>();   // each user's bytes/s in those intervals
    private final Samples probed = new Samples();   // the level when the last probe began
    private long probes;
    private long moves;

    int depth() {
        return depth;
    }

    Phase phase() {
        return phase;
    }

    private void addLevel(double bps, Map<?, Double> userBps) {
        level.add(bps);
        for (Map.Entry<?, Double> user : userBps.entrySet()) {
            users.computeIfAbsent(user.getKey(), k -> new Samples()).add(user.getValue());
        }
    }

    private void clearLevel() {
        level.clear();
        users.clear();
    }

    /**
     * Whether no user that moved here in the intervals since the last probe moved less than
     * TARGET_LOSS below its mean there in USERBPS (the probe's interval): a deeper queue whose gain is
     * taken from a user (one reader a user on a disk: the second packet shares the disk with the first,
     * and the split goes from the weights' to the kernel's) is a different split, not work conserved.
     * Two CPU-bound threads on two cores each gain from the second slot.
     */
    private boolean noneLost(Map<?, Double> userBps) {
        for (Map.Entry<Object, Samples> user : users.entrySet()) {
            Double now = userBps.get(user.getKey());
            if (now != null && user.getValue().count() >= 2 && now < user.getValue().mean() * (1 - TARGET_LOSS)) {
                return false;
            }
        }
        return true;
    }

    long probes() {
        return probes;
    }

    long moves() {
        return moves;
    }

    /**
     * One interval is over: it moved BPS, its queue was non-empty most of it (BINDING), and SHARERS
     * users had packets there (waiting, dispatched or in flight), each moving USERS' bytes/s (by any
     * key that names a user at this volume). Returns the depth for the next interval.
     */
    int interval(double bps, boolean binding, int sharers, Map<?, Double> userBps) {
        if (sharers <= 1) {
            return depth;   // nobody to order, and nothing bound: the depth waits for users who share
        }
        if (phase != Phase.STEADY) {
            // Judged whether or not anyone waited: a depth that lets every thread go shows it by its
            // throughput alone (two CPU-bound threads on two cores).
            // Up must clear the noise too: a deeper queue costs the weights, so it is bought only on
            // evidence. Down is judged on the interval alone: the depth it leaves was kept on evidence
            // (or by a load that changed), and one that gains under the target is not worth its cost.
            boolean up = phase == Phase.PROBING_UP;
            boolean kept = level.count() >= 2 && (up
                    ? bps > level.mean() * (1 + TARGET_LOSS) + Z_SCORE * level.errorAgainstOne() && noneLost(userBps)
                    : bps >= level.mean() * (1 - TARGET_LOSS));
            clearLevel();
            if (kept) {
                moves++;
                addLevel(bps, userBps);   // the new depth's level: this interval so far
                probeEvery = PROBE_EVERY;
            } else {
                depth += up ? -1 : 1;
                probeEvery = Math.min(LEAST_PROBED, 2 * probeEvery);
            }
            phase = Phase.STEADY;
            return depth;
        }
        if (!binding) {
            // The depth held nobody back: nothing learnt about it. It is left as it was, as after an
            // interval alone: cut to what was in flight, a pause in the load (a writer between blocks,
            // the end of a transfer) cost CPU-bound volumes a second at depth 1 until the next probe.
            return depth;
        }
        addLevel(bps, userBps);
        if (probed.count() > 0 && level.count() >= PROBE_EVERY && Math.abs(level.mean() - probed.mean())
                > probed.mean() * TARGET_LOSS + Z_SCORE * probed.errorAgainst(level)) {
            probeEvery = PROBE_EVERY;   // the load changed: what the last probes found may not hold
        }
        if (++bindingSince < probeEvery) {
            return depth;
        }
        bindingSince = 0;
        probed.copy(level);
        probes++;
        boolean up = nextProbeUp || depth == 1;
        nextProbeUp = !up;
        phase = up ? Phase.PROBING_UP : Phase.PROBING_DOWN;
        depth += up ? 1 : -1;
        return depth;
    }
}
