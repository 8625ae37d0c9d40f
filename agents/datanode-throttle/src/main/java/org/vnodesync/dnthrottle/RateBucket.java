package org.vnodesync.dnthrottle;

/**
 * One user's budget in one direction, shared by all of that user's ops on this DataNode.
 * Reservation style: each call books its bytes after the previous bookings and the caller sleeps
 * until its booking is due, so concurrent ops of one user share the rate. Up to BURST_NS of idle
 * time is credited, so a user that was quiet is not slowed for its first packets.
 */
final class RateBucket {
    static final long BURST_NS = 100_000_000L;

    private volatile long bytesPerSecond;
    private long nextFreeNs;
    private boolean started;

    RateBucket(long bytesPerSecond) {
        this.bytesPerSecond = bytesPerSecond;
    }

    long rate() {
        return bytesPerSecond;
    }

    void setRate(long bytesPerSecond) {
        this.bytesPerSecond = bytesPerSecond;
    }

    /** Books BYTES at NOW_NS and returns how long the caller must wait (0 when unlimited or within budget). */
    synchronized long reserve(long bytes, long nowNs) {
        long rate = bytesPerSecond;
        if (rate <= 0 || bytes <= 0) {
            return 0;
        }
        if (!started || nextFreeNs < nowNs - BURST_NS) {
            nextFreeNs = nowNs - BURST_NS;
            started = true;
        }
        nextFreeNs += costNs(bytes, rate);
        return Math.max(0, nextFreeNs - nowNs);
    }

    private static long costNs(long bytes, long rate) {
        // bytes * 1e9 / rate without overflow for any realistic packet.
        if (bytes < Long.MAX_VALUE / 1_000_000_000L) {
            return bytes * 1_000_000_000L / rate;
        }
        return (long) ((double) bytes * 1e9 / rate);
    }
}
