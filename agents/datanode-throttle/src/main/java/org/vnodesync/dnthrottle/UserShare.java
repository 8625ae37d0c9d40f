package org.vnodesync.dnthrottle;

/**
 * What one user (or DEFAULT) is given in one direction on this DataNode, as the last APPLY set it:
 * its weight at every volume, its floor and its ceiling buckets (node-wide, bytes/s).
 */
final class UserShare {
    /** Ceiling: the most it may move, bytes/s (0 = none). A thread waits for it before it asks a volume. */
    final RateBucket ceiling = new RateBucket(0);
    /** Floor: what it is owed whatever the weights say, bytes/s (0 = none): packets it covers go first. */
    final RateBucket floor = new RateBucket(0);
    /** > 0: dispatched by weight at each volume; 0: not scheduled (its ceiling alone holds it). */
    volatile double weight;
}
