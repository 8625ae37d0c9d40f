package org.vnodesync.dnthrottle;

import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import org.apache.hadoop.hdfs.util.Canceler;
import org.apache.hadoop.hdfs.util.DataTransferThrottler;

/**
 * The throttler handed to one op in place of the node-wide one: schedules each packet's bytes in the
 * user's flow (WeightedScheduler), counts them and the time slept, then passes them on to the node-wide
 * throttler (if the DataNode has one). The superclass's own bucket is never used.
 */
final class UserThrottler extends DataTransferThrottler {
    interface Clock {
        long nanoTime();
    }

    interface Sleeper {
        void sleepNanos(long ns) throws InterruptedException;
    }

    static final Clock SYSTEM_CLOCK = System::nanoTime;
    /** Parks for NS (Thread.sleep(ms, ns) rounds any nanoseconds up to a whole millisecond). */
    static final Sleeper SYSTEM_SLEEPER = ns -> {
        LockSupport.parkNanos(ns);
        if (Thread.interrupted()) {
            throw new InterruptedException();
        }
    };

    private final Throttles.Charge charge;
    private final DataTransferThrottler nodeWide;
    private final Clock clock;
    private final Sleeper sleeper;
    // The op's own counters, flow and scheduler, looked up once per op rather than once per packet.
    private final LongAdder counted;
    private final LongAdder waited;
    private final LongAdder late;
    private final Flow flow;
    private final WeightedScheduler scheduler;
    private final WeightedScheduler.Ticket ticket = new WeightedScheduler.Ticket();

    UserThrottler(Throttles.Charge charge, Direction direction, WeightedScheduler scheduler,
                  DataTransferThrottler nodeWide, Clock clock, Sleeper sleeper) {
        super(Long.MAX_VALUE);
        this.charge = charge;
        this.nodeWide = nodeWide;
        this.clock = clock;
        this.sleeper = sleeper;
        UserCounters counters = charge.counters();
        this.counted = direction == Direction.READ ? counters.readBytes : counters.writeBytes;
        this.waited = direction == Direction.READ ? counters.readWaitNs : counters.writeWaitNs;
        this.late = direction == Direction.READ ? counters.readLateNs : counters.writeLateNs;
        this.flow = charge.flow(direction);
        this.scheduler = scheduler;
        if (direction == Direction.READ) {
            scheduler.openingRead(flow, clock.nanoTime());
        }
    }

    String user() {
        return charge.name();
    }

    DataTransferThrottler nodeWide() {
        return nodeWide;
    }

    /** The transfer is over: what was charged for a packet it will not send is given back. */
    void close() {
        scheduler.release(flow, ticket);
    }

    @Override
    public void throttle(long numOfBytes) {
        throttle(numOfBytes, null);
    }

    @Override
    public void throttle(long numOfBytes, Canceler canceler) {
        try {
            ownThrottle(numOfBytes, canceler);
        } catch (RuntimeException | Error e) {
            AgentLog.once("throttle", "per-user throttling failed; the op goes on unthrottled by user", e);
        }
        if (nodeWide != null) {
            nodeWide.throttle(numOfBytes, canceler);
        }
    }

    private void ownThrottle(long bytes, Canceler canceler) {
        counted.add(bytes);
        long start = clock.nanoTime();
        long due = scheduler.admit(flow, bytes, start, ticket);
        if (due - start < WeightedScheduler.LEAST_SLEEP_NS) {
            ticket.released(start);
            return;
        }
        long now = start;
        try {
            // In slices: V may reach the packet's tag sooner than foreseen (a flow left).
            while (due - now >= WeightedScheduler.LEAST_SLEEP_NS && (canceler == null || !canceler.isCancelled())) {
                sleeper.sleepNanos(Math.min(due - now, WeightedScheduler.MAX_SLICE_NS));
                now = clock.nanoTime();
                due = scheduler.recheck(flow, now, ticket);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            long end = clock.nanoTime();
            ticket.released(end);
            waited.add(end - start);
            late.add(Math.max(0, end - due));
        }
    }
}
