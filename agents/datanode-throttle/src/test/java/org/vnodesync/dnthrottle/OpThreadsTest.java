package org.vnodesync.dnthrottle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PipedInputStream;
import java.io.PipedOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Test;

class OpThreadsTest {
    private final OpThreads threads = new OpThreads();

    /** A watcher on its own thread, as a control connection's; its lines are read here. */
    private BufferedReader watch() throws IOException {
        PipedInputStream in = new PipedInputStream(1 << 16);
        PipedOutputStream out = new PipedOutputStream(in);
        Thread watcher = new Thread(() -> {
            try {
                threads.watch(out);
                out.close();
            } catch (IOException e) {
                // the test hung up
            }
        }, "watcher");
        watcher.setDaemon(true);
        watcher.start();
        return new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
    }

    @Test
    void theTidIsTheKernelsOwnForThisThread() {
        long tid = OpThreads.ownTid();
        assertTrue(Files.isDirectory(Paths.get("/proc/self/task/" + tid)), "TID " + tid + " is a task of this JVM");
    }

    @Test
    void aWatcherGetsTheOpsInProgressThenEveryStartAndEnd() throws Exception {
        long tid = OpThreads.ownTid();
        threads.started("alice");
        BufferedReader lines = watch();
        assertEquals("OK watching threads", lines.readLine());
        assertEquals("THREAD tid=" + tid + " user=alice", lines.readLine());
        threads.ended();
        assertEquals("IDLE tid=" + tid, lines.readLine());
        threads.started(Throttles.DEFAULT);
        assertEquals("THREAD tid=" + tid, lines.readLine(), "DEFAULT is named by no user");
        assertEquals(1, threads.serving());
    }

    @Test
    void opsOnOtherThreadsAreToldByTheirOwnTid() throws Exception {
        BufferedReader lines = watch();
        assertEquals("OK watching threads", lines.readLine());
        long[] seen = new long[1];
        CountDownLatch done = new CountDownLatch(1);
        Thread op = new Thread(() -> {
            seen[0] = OpThreads.ownTid();
            threads.started("bob");
            threads.ended();
            done.countDown();
        });
        op.start();
        done.await();
        assertTrue(seen[0] != OpThreads.ownTid());
        assertEquals("THREAD tid=" + seen[0] + " user=bob", lines.readLine());
        assertEquals("IDLE tid=" + seen[0], lines.readLine());
        assertEquals(0, threads.serving());
    }

    @Test
    void aWatcherThatFallsBehindIsToldAndDropped() throws Exception {
        PipedInputStream in = new PipedInputStream(64);   // too small to take the burst: the watcher blocks
        PipedOutputStream out = new PipedOutputStream(in);
        CountDownLatch ended = new CountDownLatch(1);
        Thread watcher = new Thread(() -> {
            try {
                threads.watch(out);
            } catch (IOException e) {
                // not expected
            }
            ended.countDown();
        });
        watcher.setDaemon(true);
        watcher.start();
        BufferedReader lines = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
        assertEquals("OK watching threads", lines.readLine());
        for (int i = 0; i < 2 * OpThreads.QUEUE + 10; i++) {
            threads.started("carol");
            threads.ended();
        }
        String line;
        String last = null;
        while ((line = lines.readLine()) != null && !line.startsWith("ERR")) {
            last = line;
        }
        assertTrue(line != null && line.startsWith("ERR overflow"), "after " + last + ": " + line);
        ended.await();
    }
}
