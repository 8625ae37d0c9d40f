package org.vnodesync.dnthrottle;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class RateBucketTest {
    private static final int THREADS = 8;
    private static final int PER_THREAD = 20_000;

    /**
     * Many threads of one user book at once: each booking must follow another, none lost or
     * given twice. Every booking is made at the same instant and costs one second (more than the
     * burst credit), so the waits handed out are exactly k x 1 s - burst for k = 1..all.
     */
    @Test
    void concurrentBookingsAreEachCountedOnce() throws Exception {
        RateBucket bucket = new RateBucket(1_000);       // 1,000 B/s: 1,000 B cost 1 s
        long now = 5_000_000_000L;
        long cost = 1_000_000_000L;
        ExecutorService pool = Executors.newFixedThreadPool(THREADS);
        CountDownLatch start = new CountDownLatch(1);
        List<Future<long[]>> results = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            results.add(pool.submit(() -> {
                start.await();
                long[] waits = new long[PER_THREAD];
                for (int i = 0; i < PER_THREAD; i++) {
                    waits[i] = bucket.reserve(1_000, now);
                }
                return waits;
            }));
        }
        start.countDown();
        long[] all = new long[THREADS * PER_THREAD];
        int n = 0;
        for (Future<long[]> result : results) {
            for (long wait : result.get(60, TimeUnit.SECONDS)) {
                all[n++] = wait;
            }
        }
        pool.shutdown();
        assertTrue(pool.awaitTermination(10, TimeUnit.SECONDS));
        Arrays.sort(all);
        long[] expected = new long[all.length];
        for (int k = 1; k <= expected.length; k++) {
            expected[k - 1] = k * cost - RateBucket.BURST_NS;
        }
        assertArrayEquals(expected, all);
    }
}
