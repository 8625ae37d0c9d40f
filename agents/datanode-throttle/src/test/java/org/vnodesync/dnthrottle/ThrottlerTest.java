package org.vnodesync.dnthrottle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.apache.hadoop.hdfs.util.DataTransferThrottler;
import org.junit.jupiter.api.Test;

class ThrottlerTest {
    /** A clock that sleeping advances: throttling is checked without real time passing. */
    private static final class FakeTime implements UserThrottler.Clock, UserThrottler.Sleeper {
        long now = 1_000_000_000L;
        final List<Long> sleeps = new ArrayList<>();

        @Override
        public long nanoTime() {
            return now;
        }

        @Override
        public void sleepNanos(long ns) {
            sleeps.add(ns);
            now += ns;
        }
    }

    private static final class CountingNodeWide extends DataTransferThrottler {
        long bytes;

        CountingNodeWide() {
            super(1);
        }

        @Override
        public void throttle(long numOfBytes, org.apache.hadoop.hdfs.util.Canceler canceler) {
            bytes += numOfBytes;
        }
    }

    private static UserThrottler throttler(Throttles t, String user, Direction direction, DataTransferThrottler nodeWide,
                                           FakeTime time) {
        return new UserThrottler(t, t.chargeFor(user), direction, "DS-1", nodeWide, time, time);
    }

    @Test
    void holdsTheCeilingAndCountsBytesAndWait() {
        FakeTime time = new FakeTime();
        Throttles t = new Throttles(Policy.Shares.NONE, 0);
        t.apply(new Policy(1, Policy.Node.NONE, Policy.Shares.NONE,
                Maps.of("alice", Policy.Shares.ceilings(0, 10_000_000)), Collections.emptyMap(),
                Collections.emptyMap()));
        long start = time.now;
        UserThrottler throttler = throttler(t, "alice", Direction.WRITE, null, time);
        for (int i = 0; i < 1000; i++) {
            throttler.throttle(64 * 1024);
        }
        double seconds = (time.now - start) / 1e9;
        double rate = 1000 * 64 * 1024 / seconds;
        assertTrue(rate <= 10_000_000 * 1.02 && rate >= 10_000_000 * 0.95, "rate " + rate);
        UserCounters c = t.chargeFor("alice").counters();
        assertEquals(1000L * 64 * 1024, c.writeBytes.sum());
        assertEquals(time.now - start, c.writeWaitNs.sum());
        assertEquals(0, c.readBytes.sum());
    }

    @Test
    void noCeilingAndNoCapacityNeverSleepsButCounts() {
        FakeTime time = new FakeTime();
        Throttles t = new Throttles(Policy.Shares.NONE, 0);
        UserThrottler throttler = throttler(t, null, Direction.READ, null, time);
        for (int i = 0; i < 100; i++) {
            throttler.throttle(1 << 20);
        }
        assertTrue(time.sleeps.isEmpty());
        assertEquals(100L << 20, t.chargeFor(null).counters().readBytes.sum());
    }

    @Test
    void passesBytesOnToTheNodeWideThrottler() {
        FakeTime time = new FakeTime();
        Throttles t = new Throttles(Policy.Shares.NONE, 0);
        CountingNodeWide nodeWide = new CountingNodeWide();
        throttler(t, null, Direction.READ, nodeWide, time).throttle(4096);
        assertEquals(4096, nodeWide.bytes);
    }

    @Test
    void anIdleUserGetsOnlyABurstOfCredit() {
        RateBucket bucket = new RateBucket(1_000_000);
        long now = 0;
        assertEquals(0, bucket.reserve(100_000, now));
        now += 60_000_000_000L;  // a minute idle
        long wait = bucket.reserve(1_000_000, now);
        assertEquals(1_000_000_000L - RateBucket.BURST_NS, wait);
    }

    @Test
    void concurrentBookingsShareTheRateWithoutLosingAny() throws Exception {
        RateBucket bucket = new RateBucket(100_000_000L);  // 10 ns per byte
        long now = 5_000_000_000L;
        int threads = 4;
        int each = 10_000;
        long[] longest = new long[threads];
        Thread[] workers = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            int index = i;
            workers[i] = new Thread(() -> {
                for (int n = 0; n < each; n++) {
                    longest[index] = Math.max(longest[index], bucket.reserve(1000, now));
                }
            });
            workers[i].start();
        }
        for (Thread worker : workers) {
            worker.join();
        }
        long last = java.util.Arrays.stream(longest).max().getAsLong();
        // Every booking counted once: the last one is due after all bytes minus the burst credit.
        assertEquals((long) threads * each * 1000 * 10 - RateBucket.BURST_NS, last);
    }

    @Test
    void aWeightedUserAloneNeverWaitsAndItsSlotIsFreeOnceTheTransferEnds() {
        FakeTime time = new FakeTime();
        Throttles t = new Throttles(Policy.Shares.NONE, 0);
        Policy.Shares w = new Policy.Shares(new Policy.Share(1, 0, 0), new Policy.Share(1, 0, 0));
        t.apply(new Policy(1, Policy.Node.NONE, Policy.Shares.NONE, Maps.of("alice", w),
                Collections.emptyMap(), Collections.emptyMap()));
        UserThrottler alice = throttler(t, "alice", Direction.READ, null, time);
        assertEquals(1, t.volume("DS-1").inFlight(), "the op's first packet holds a slot before it moves");
        for (int i = 0; i < 100; i++) {
            alice.throttle(64 * 1024);
        }
        assertTrue(time.sleeps.isEmpty());
        alice.close();
        assertEquals(0, t.volume("DS-1").inFlight());
        assertEquals(100L * 64 * 1024, t.chargeFor("alice").counters().readBytes.sum());
    }

    @Test
    void hooksLeaveHadoopsThrottlerAloneOutsideAnOp() {
        CountingNodeWide original = new CountingNodeWide();
        Hooks.install(new Throttles(Policy.Shares.NONE, 0), new Identity(new SocketOwners(Paths.get("/nonexistent"))));
        Hooks.opEnd();
        assertTrue(Hooks.forSend(original, null, null) == original);
        Hooks.opStart(null, "/10.1.1.1:5000", "/10.1.1.2:9866", false);
        DataTransferThrottler during = Hooks.forSend(original, null, null);
        assertTrue(during instanceof UserThrottler);
        assertEquals(Throttles.DEFAULT, ((UserThrottler) during).user());
        assertTrue(((UserThrottler) during).nodeWide() == original);
        Hooks.opEnd();
        assertTrue(Hooks.forReceive(null, null, null) == null);
    }
}
