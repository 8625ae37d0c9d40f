package org.vnodesync.dnthrottle;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

/**
 * Which thread (by its kernel TID) serves which user's op now, told to the storage agent, which moves
 * each thread into its user's CPU cgroup (docs/edge.md G10). The DataNode runs unprivileged, so it
 * never writes cgroupfs itself: it only says, on a control connection that asked with
 * {@code WATCH threads}, {@code THREAD tid=N [user=NAME]} when an op starts (no user: DEFAULT) and
 * {@code IDLE tid=N} when it ends, after a snapshot of the ops in progress. An op's thread only offers
 * a line to each watcher's bounded queue; the watcher's own connection thread writes it. A watcher
 * that falls behind by QUEUE lines is closed ({@code ERR overflow}): the storage agent asks again and
 * gets a fresh snapshot.
 */
final class OpThreads {
    /** Lines a watcher may fall behind before it is dropped (a storage agent that stopped reading). */
    static final int QUEUE = 4096;
    /** Without news for this long a watcher is sent TICK, so a peer that went away is noticed. */
    static final long TICK_MS = 5000;
    static final String TICK = "TICK";
    private static final String OVERFLOW = "\u0000overflow";

    private final Map<Long, String> serving = new ConcurrentHashMap<>();
    private final CopyOnWriteArrayList<BlockingQueue<String>> watchers = new CopyOnWriteArrayList<>();
    private final ThreadLocal<long[]> tid = ThreadLocal.withInitial(() -> new long[] {OpThreads.ownTid()});

    /** This thread's kernel TID (/proc/thread-self, Linux 3.17); 0 where it cannot be read. */
    static long ownTid() {
        try {
            Path self = Files.readSymbolicLink(Paths.get("/proc/thread-self"));
            return Long.parseLong(self.getFileName().toString());
        } catch (IOException | RuntimeException e) {
            AgentLog.once("tid", "cannot read this thread's TID; its ops get no CPU share by weight", e);
            return 0;
        }
    }

    /** The calling thread starts an op of USER (Throttles.DEFAULT: the default). */
    void started(String user) {
        long t = tid.get()[0];
        if (t <= 0) {
            return;
        }
        serving.put(t, user);
        if (!watchers.isEmpty()) {
            publish(thread(t, user));
        }
    }

    /** The calling thread's op is over. */
    void ended() {
        long t = tid.get()[0];
        if (t > 0 && serving.remove(t) != null && !watchers.isEmpty()) {
            publish("IDLE tid=" + t);
        }
    }

    int serving() {
        return serving.size();
    }

    private static String thread(long t, String user) {
        return Throttles.DEFAULT.equals(user) ? "THREAD tid=" + t : "THREAD tid=" + t + " user=" + user;
    }

    private void publish(String line) {
        for (BlockingQueue<String> queue : watchers) {
            if (!queue.offer(line)) {
                queue.clear();
                queue.offer(OVERFLOW);
            }
        }
    }

    /**
     * Streams the ops in progress, then every start and end, to OUT until the peer goes away or falls
     * behind. Runs on the watcher's connection thread.
     */
    void watch(OutputStream out) throws IOException {
        BlockingQueue<String> queue = new ArrayBlockingQueue<>(QUEUE);
        watchers.add(queue);  // before the snapshot: a start in between is sent twice, never lost
        try {
            StringBuilder snapshot = new StringBuilder("OK watching threads\n");
            for (Map.Entry<Long, String> op : serving.entrySet()) {
                snapshot.append(thread(op.getKey(), op.getValue())).append('\n');
            }
            out.write(snapshot.toString().getBytes(StandardCharsets.UTF_8));
            out.flush();
            while (true) {
                String first = queue.poll(TICK_MS, TimeUnit.MILLISECONDS);
                StringBuilder lines = new StringBuilder();
                boolean overflow = false;
                for (String next = first == null ? TICK : first; next != null; next = queue.poll()) {
                    if (OVERFLOW.equals(next)) {
                        overflow = true;
                        lines.append("ERR overflow: more than ").append(QUEUE)
                                .append(" op starts and ends unread; ask again\n");
                        break;
                    }
                    lines.append(next).append('\n');
                }
                out.write(lines.toString().getBytes(StandardCharsets.UTF_8));
                out.flush();
                if (overflow) {
                    return;
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            watchers.remove(queue);
        }
    }
}
