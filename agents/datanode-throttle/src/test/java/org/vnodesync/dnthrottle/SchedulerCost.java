package org.vnodesync.dnthrottle;

import java.util.HashMap;
import java.util.Map;
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
 * it): a static cap's step (RateBucket.reserve, one compare-and-set) against the dispatcher's (a tag,
 * and a slot taken and given back under its lock), with the depth never binding so nothing parks, on
 * one thread and on two with two users. Time comes from a counter each call advances by a packet's
 * time at 10 GB/s, so no clock read is measured either side.
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
        Dispatcher volume;
        Flow[] flows;

        @Setup
        public void setup() {
            buckets = new RateBucket[] {new RateBucket(10_000_000_000L), new RateBucket(10_000_000_000L)};
            throttles = new Throttles(Policy.Shares.NONE, 0);
            Map<String, Policy.Shares> users = new HashMap<>();
            users.put("alice", new Policy.Shares(new Policy.Share(8, 0, 0), Policy.Share.NONE));
            users.put("bob", new Policy.Shares(new Policy.Share(4, 0, 0), Policy.Share.NONE));
            throttles.apply(new Policy(1, Policy.Node.NONE, Policy.Shares.NONE, users, new HashMap<>(), new HashMap<>()));
            volume = throttles.volume("DS-1");
            // Two threads at once: let both hold a slot, as a volume whose depth covers them.
            for (int i = 0; i < 40; i++) {
                volume.tick(i * DepthLoop.PERIOD_NS);
            }
            flows = new Flow[] {throttles.flow(volume, throttles.chargeFor("alice")),
                throttles.flow(volume, throttles.chargeFor("bob"))};
        }
    }

    @State(Scope.Thread)
    public static class Op {
        Dispatcher.Ticket[] tickets;
        int next;
    }

    /** A static cap's per-packet step: one compare-and-set in the user's bucket. */
    @Benchmark
    public long rateBucket(Node node, Op op) {
        long now = node.clock.addAndGet(PACKET_NS);
        return node.buckets[op.next++ & 1].reserve(PACKET, now);
    }

    /** The dispatcher's per-packet step (tag, slot), alternating two users' flows; the slot is given back at once. */
    @Benchmark
    public boolean dispatch(Node node, Op op) {
        long now = node.clock.addAndGet(PACKET_NS);
        if (op.tickets == null) {
            op.tickets = new Dispatcher.Ticket[] {new Dispatcher.Ticket(node.flows[0], Direction.READ, Thread.currentThread()),
                new Dispatcher.Ticket(node.flows[1], Direction.READ, Thread.currentThread())};
        }
        Dispatcher.Ticket ticket = op.tickets[op.next++ & 1];
        boolean go = node.volume.ask(ticket, PACKET, 8, false, now);
        node.volume.release(ticket, 0, now);
        return go;
    }
}
