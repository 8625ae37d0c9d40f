package org.vnodesync.dnthrottle;

import java.io.OutputStream;
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;

/**
 * What telling the storage agent an op's thread costs the op (OpThreads.started + ended), in the op's own
 * thread: with no watcher, with one watcher reading every line, and an op on a new thread (its TID read
 * once from /proc/thread-self). Median wall nanoseconds per op over the rounds (benchmarks/cpu_shares_cost.py).
 *
 *   java -cp vnode-sync-datanode-throttle.jar:test-classes org.vnodesync.dnthrottle.OpThreadsCost [rounds]
 */
public final class OpThreadsCost {
    private OpThreadsCost() {
    }

    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 20_000;
        OpThreads threads = new OpThreads();
        System.out.printf("op start + end told to the storage agent: %d rounds, median ns per op%n", rounds);
        System.out.printf("%-46s %10.0f%n", "no watcher", median(ops(threads, rounds)));
        Thread watcher = new Thread(() -> {
            try {
                threads.watch(OutputStream.nullOutputStream());
            } catch (Exception e) {
                // ends with the JVM
            }
        });
        watcher.setDaemon(true);
        watcher.start();
        Thread.sleep(100);
        System.out.printf("%-46s %10.0f%n", "one watcher", median(ops(threads, rounds)));
        long[] fresh = new long[Math.min(rounds, 2000)];
        for (int i = 0; i < fresh.length; i++) {
            int at = i;
            CountDownLatch done = new CountDownLatch(1);
            Thread op = new Thread(() -> {
                long start = System.nanoTime();
                threads.started("alice");
                threads.ended();
                fresh[at] = System.nanoTime() - start;
                done.countDown();
            });
            op.start();
            done.await();
        }
        System.out.printf("%-46s %10.0f%n", "one watcher, first op of a new thread (its TID)", median(fresh));
    }

    private static long[] ops(OpThreads threads, int rounds) {
        long[] took = new long[rounds];
        for (int i = 0; i < rounds; i++) {
            long start = System.nanoTime();
            threads.started(i % 2 == 0 ? "alice" : "bob");
            threads.ended();
            took[i] = System.nanoTime() - start;
        }
        return took;
    }

    private static double median(long[] values) {
        long[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }
}
