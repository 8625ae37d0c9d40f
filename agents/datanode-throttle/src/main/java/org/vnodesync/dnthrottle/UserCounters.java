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

    /** "read_bytes=N write_bytes=N read_wait_ns=N write_wait_ns=N read_ops=N write_ops=N" */
    String fields() {
        return "read_bytes=" + readBytes.sum() + " write_bytes=" + writeBytes.sum() + " read_wait_ns="
                + readWaitNs.sum() + " write_wait_ns=" + writeWaitNs.sum() + " read_ops=" + readOps.sum()
                + " write_ops=" + writeOps.sum();
    }
}
