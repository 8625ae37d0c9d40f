package org.vnodesync.dnthrottle;

/**
 * One user's (or DEFAULT's) traffic in one direction of one DataNode, as the scheduler sees it: its
 * local weight, its floor (reservation) and ceiling (limit) buckets, and its place in the virtual
 * time. Made when an APPLY first names the user, never per packet; kept when the user leaves.
 */
final class Flow {
    final String name;
    /** Ceiling: the most this flow may move, bytes/s (0 = none). Booked outside the scheduler's lock. */
    final RateBucket ceiling = new RateBucket(0);
    /** Floor: what it is owed whatever the weights say, bytes/s (0 = none). Booked under the lock. */
    final RateBucket floor = new RateBucket(0);

    // Guarded by the scheduler's lock.
    double weight;          // > 0 to be scheduled by weight; 0: only the ceiling holds it
    double finish;          // virtual finish tag of its last packet
    double keep;            // virtual time past FINISH it stays in the sum: its share kept while its thread is away
    long lastHeldNs = Long.MIN_VALUE / 2;      // when a packet of it last waited for its weight
    long finishEpoch = -1;  // the scheduler's epoch that tag belongs to (V restarts from 0 in a new one)
    // Its weight changes in the scheduler's current epoch, composed: a tag made before them at x is now at
    // retagScale * x + retagShift (WeightedScheduler.setWeight). Identity while retagEpoch is not the epoch.
    double retagScale = 1;
    double retagShift;
    long retagEpoch = -1;
    long lastArrivalNs = Long.MIN_VALUE / 2;   // when its last packet arrived
    long credit;            // bytes it may still take at once, back from a pause
    boolean creditAside;    // the credit goes beside the others' shares (a writer back from idle)
    int heapIndex = -1;     // its slot in the scheduler's backlogged heap; -1: not backlogged
    double paceNs;          // ns per byte its packets take in flight, smoothed (0: not known yet)
    int interval = -1;      // the scheduler's last interval it had a packet continuing a charged op in
    long intervalBytes;     // bytes of its packets that continued a charged op, in that interval
    boolean partial;        // in that interval, one of them was charged only in part (a slow op: precharge)
    long intervalHeldNs;    // how long those packets waited for its weight
    boolean capped;         // in that interval, a packet of it waited for its ceiling
    boolean throughout;     // it had such packets in the interval before that one too
    long lastContinuedNs;   // when the last of them moved

    Flow(String name) {
        this.name = name;
    }

    boolean backlogged() {
        return heapIndex >= 0;
    }

    /** Where V takes it out of the sum (WeightedScheduler's heap is ordered by it). */
    double leaves() {
        return finish + keep;
    }
}
