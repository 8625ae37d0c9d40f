package org.vnodesync.dnthrottle;

import java.util.concurrent.atomic.LongAdder;

/** Monotonic per-user counters since JVM start (kept when a user leaves the rate set). */
final class UserCounters {
    final LongAdder readBytes = new LongAdder();
    final LongAdder writeBytes = new LongAdder();
    final LongAdder readWaitNs = new LongAdder();
    final LongAdder writeWaitNs = new LongAdder();
    final LongAdder readOps = new LongAdder();
    final LongAdder writeOps = new LongAdder();

    void addBytes(Direction direction, long bytes) {
        (direction == Direction.READ ? readBytes : writeBytes).add(bytes);
    }

    void addWait(Direction direction, long ns) {
        (direction == Direction.READ ? readWaitNs : writeWaitNs).add(ns);
    }

    void addOp(Direction direction) {
        (direction == Direction.READ ? readOps : writeOps).increment();
    }

    /** "<read_bytes> <write_bytes> <read_wait_ns> <write_wait_ns> <read_ops> <write_ops>" */
    String line() {
        return readBytes.sum() + " " + writeBytes.sum() + " " + readWaitNs.sum() + " " + writeWaitNs.sum()
                + " " + readOps.sum() + " " + writeOps.sum();
    }
}
