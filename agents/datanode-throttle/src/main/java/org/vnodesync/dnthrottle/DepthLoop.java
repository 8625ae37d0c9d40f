package org.vnodesync.dnthrottle;

/**
 * Every PERIOD_NS each dispatcher's interval ends (a volume's, and its read packets'): its depth is judged
 * (Depth) and its burst measured. No packet ever waits for this loop; it only moves depths.
 */
final class DepthLoop {
    /** An interval: long enough to hold ~100 packets of a 60 MB/s disk, short enough to follow a load within a second. */
    static final long PERIOD_NS = 100_000_000L;

    private final Throttles throttles;

    DepthLoop(Throttles throttles) {
        this.throttles = throttles;
    }

    void start() {
        Thread thread = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(PERIOD_NS / 1_000_000L);
                    tick(System.nanoTime());
                } catch (InterruptedException e) {
                    return;
                } catch (Throwable e) {
                    AgentLog.once("depth", "the depth loop failed; depths stay where they are", e);
                }
            }
        }, "vnode-sync-throttle-depth");
        thread.setDaemon(true);
        thread.start();
    }

    void tick(long now) {
        for (Dispatcher dispatcher : throttles.dispatchers()) {
            dispatcher.tick(now);
        }
    }
}
