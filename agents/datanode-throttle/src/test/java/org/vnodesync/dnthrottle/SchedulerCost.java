package org.vnodesync.dnthrottle;

import java.util.Collections;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

/**
 * The per-packet cost of the DataNode throttle's path (JMH; benchmarks/datanode_scheduler_cost.py runs
 * it): what main's path did for each 64 KiB packet (RateBucket.reserve) against what the weighted
 * scheduler does (admit: virtual time, the backlogged heap, and the ceiling's bucket), limits never
 * binding so nothing sleeps, on one thread and on two (the VM's cores) with two users. Time comes from
 * a counter each call advances by a packet's time at 10 GB/s, so no clock read is measured either side.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class SchedulerCost {
    static final long PACKET = 64 * 1024;
    static final long PACKET_NS = PACKET * 1_000_000_000L / 10_000_000_000L;   // at 10 GB/s

    @State(Scope.Benchmark)
    public static class Node {
        final AtomicLong clock = new AtomicLong(1_000_000_000L);
        RateBucket[] buckets;
        Throttles throttles;
        WeightedScheduler scheduler;
        Flow[] flows;

        @Setup
        public void setup() {
            buckets = new RateBucket[] {new RateBucket(10_000_000_000L), new RateBucket(10_000_000_000L)};
            throttles = new Throttles(Policy.Shares.NONE, 0, clock::get);
            Policy.Shares a = new Policy.Shares(new Policy.Share(8, 0, 10_000_000_000L), Policy.Share.NONE);
            Policy.Shares b = new Policy.Shares(new Policy.Share(4, 0, 10_000_000_000L), Policy.Share.NONE);
            throttles.apply(new Policy(1, new Policy.Node(20_000_000_000L, 0, Collections.<DeviceId>emptyList()),
                    Policy.Shares.NONE,
                    Maps.of("alice", a, "bob", b), Collections.emptyMap(), Collections.emptyMap()));
            scheduler = throttles.scheduler(Direction.READ);
            flows = new Flow[] {throttles.chargeFor("alice").read(), throttles.chargeFor("bob").read()};
        }
    }

    @State(Scope.Thread)
    public static class Op {
        final WeightedScheduler.Ticket ticket = new WeightedScheduler.Ticket();
        int next;
    }

    /** main's per-packet step: one compare-and-set in the user's bucket. */
    @Benchmark
    public long rateBucket(Node node, Op op) {
        long now = node.clock.addAndGet(PACKET_NS);
        return node.buckets[op.next++ & 1].reserve(PACKET, now);
    }

    /** The weighted scheduler's per-packet step, alternating two users' flows (both backlogged). */
    @Benchmark
    public long weightedAdmit(Node node, Op op) {
        long now = node.clock.addAndGet(PACKET_NS);
        long due = node.scheduler.admit(node.flows[op.next++ & 1], PACKET, now, op.ticket);
        op.ticket.released(now);
        return due;
    }
}
