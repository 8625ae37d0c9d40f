package org.vnodesync.dnthrottle;

import java.util.concurrent.atomic.AtomicLong;

/**
 * One user's budget in one direction, shared by all of that user's ops on this DataNode.
 * Reservation style: each call books its bytes after the previous bookings and the caller sleeps
 * until its booking is due, so concurrent ops of one user share the rate. Up to BURST_NS of idle
 * time is credited, so a user that was quiet is not slowed for its first packets.
 * Called once per packet (64 KiB): one compare-and-set, no lock and no allocation.
 */
final class RateBucket {
    static final long BURST_NS = 100_000_000L;
    private static final long NEVER_BOOKED = Long.MIN_VALUE;

    private volatile long bytesPerSecond;
    private final AtomicLong nextFreeNs = new AtomicLong(NEVER_BOOKED);

    RateBucket(long bytesPerSecond) {
        this.bytesPerSecond = bytesPerSecond;
    }

    long rate() {
        return bytesPerSecond;
    }

    /** Unlimited: nothing to book, and the caller need not read the clock. */
    boolean unlimited() {
        return bytesPerSecond <= 0;
    }

    void setRate(long bytesPerSecond) {
        this.bytesPerSecond = bytesPerSecond;
    }

    /** Books BYTES at NOW_NS and returns how long the caller must wait (0 when unlimited or within budget). */
    long reserve(long bytes, long nowNs) {
        long rate = bytesPerSecond;
        if (rate <= 0 || bytes <= 0) {
            return 0;
        }
        long cost = costNs(bytes, rate);
        while (true) {
            long booked = nextFreeNs.get();
            long from = booked == NEVER_BOOKED || booked < nowNs - BURST_NS ? nowNs - BURST_NS : booked;
            long next = from + cost;
            if (nextFreeNs.compareAndSet(booked, next)) {
                return Math.max(0, next - nowNs);
            }
        }
    }

    /**
     * Books BYTES at NOW_NS only if the bucket covers them now (what it has not booked ahead of NOW, up
     * to BURST_NS of idle credit): a floor covers a packet or leaves it to the weights.
     */
    boolean tryTake(long bytes, long nowNs) {
        long rate = bytesPerSecond;
        if (rate <= 0 || bytes <= 0) {
            return false;
        }
        long cost = costNs(bytes, rate);
        while (true) {
            long booked = nextFreeNs.get();
            long from = booked == NEVER_BOOKED || booked < nowNs - BURST_NS ? nowNs - BURST_NS : booked;
            if (from > nowNs) {
                return false;
            }
            if (nextFreeNs.compareAndSet(booked, from + cost)) {
                return true;
            }
        }
    }

    private static long costNs(long bytes, long rate) {
        // bytes * 1e9 / rate without overflow for any realistic packet.
        if (bytes < Long.MAX_VALUE / 1_000_000_000L) {
            return bytes * 1_000_000_000L / rate;
        }
        return (long) ((double) bytes * 1e9 / rate);
    }
}
