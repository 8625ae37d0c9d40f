package org.vnodesync.dnthrottle;

/**
 * Every PERIOD_NS: how busy the node was and what each direction moved, and each direction's R moved by
 * CapacityControl. It only moves R: no packet ever waits for it.
 */
final class CapacityLoop {
    static final long PERIOD_NS = 100_000_000L;

    /** The last tick's view, for STATS. */
    static final class Last {
        private final double cpuBusy;
        private final double diskBusy;
        private final Side read;
        private final Side write;

        Last(double cpuBusy, double diskBusy, Side read, Side write) {
            this.cpuBusy = cpuBusy;
            this.diskBusy = diskBusy;
            this.read = read;
            this.write = write;
        }

        double cpuBusy() {
            return cpuBusy;
        }

        double diskBusy() {
            return diskBusy;
        }

        Side read() {
            return read;
        }

        Side write() {
            return write;
        }

        static final Last NONE = new Last(0, 0, Side.NONE, Side.NONE);

        Side of(Direction direction) {
            return direction == Direction.READ ? read : write;
        }
    }

    /** One direction's last tick: what moved, the share of packets held for their weight, and why R is where it is. */
    static final class Side {
        private final double movedBps;
        private final double held;
        private final double skew;
        private final double seenSkew;
        private final CapacityControl.Step step;

        Side(double movedBps, double held, double skew, double seenSkew, CapacityControl.Step step) {
            this.movedBps = movedBps;
            this.held = held;
            this.skew = skew;
            this.seenSkew = seenSkew;
            this.step = step;
        }

        double movedBps() {
            return movedBps;
        }

        double held() {
            return held;
        }

        double skew() {
            return skew;
        }

        double seenSkew() {
            return seenSkew;
        }

        CapacityControl.Step step() {
            return step;
        }

        static final Side NONE = new Side(0, 0, 1, 0, CapacityControl.Step.NONE);
    }

    private final Throttles throttles;
    private final ResourceSampler sampler;
    private final CapacityControl[] controls = {new CapacityControl(), new CapacityControl()};
    private final StepTally[] tallies = {new StepTally(), new StepTally()};
    private volatile Last last = Last.NONE;
    private long lastNs = -1;

    CapacityLoop(Throttles throttles, ResourceSampler sampler) {
        this.throttles = throttles;
        this.sampler = sampler;
    }

    Last last() {
        return last;
    }

    StepTally tally(Direction direction) {
        return tallies[direction.ordinal()];
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
                    AgentLog.once("capacity", "the capacity control failed; R stays where it is", e);
                }
            }
        }, "vnode-sync-throttle-capacity");
        thread.setDaemon(true);
        thread.start();
    }

    /** One step at NOW (ns). */
    void tick(long now) {
        sampler.devices(throttles.policy().node().devices());
        ResourceSampler.Busy busy = sampler.sample(now);
        tickWith(now, busy.cpu(), busy.disk(), busy.writtenBps());
    }

    /**
     * One step at NOW with the node's CPU and busiest data disk that busy (0..1) since the last one,
     * and its data disks having written DISK_WRITTEN_BPS meanwhile.
     */
    void tickWith(long now, double cpuBusy, double diskBusy, double diskWrittenBps) {
        Policy.Node node = throttles.policy().node();
        double busiest = Math.max(cpuBusy, diskBusy);
        double seconds = lastNs < 0 ? 0 : (now - lastNs) / 1e9;
        lastNs = now;
        Side[] sides = {Side.NONE, Side.NONE};
        for (Direction direction : Direction.values()) {
            WeightedScheduler scheduler = throttles.scheduler(direction);
            WeightedScheduler.Interval interval = scheduler.takeInterval(now);
            if (seconds <= 0) {
                continue;
            }
            CapacityControl control = controls[direction.ordinal()];
            CapacityControl.Seen seen = CapacityControl.Seen.of(interval, seconds, cpuBusy, diskBusy);
            if (direction == Direction.WRITE) {
                // A write packet's time in flight is the client's and the rest of its pipeline's as
                // much as this node's: a split skewed there is not R's to even out (measured: lowering
                // R for it cost FsShell writers a fifth of the node and moved the split away from 2),
                // unless this node's CPU is what saturates (encryption: its threads are short of it).
                seen = seen.onlyCpuSkew().withDrained(diskWrittenBps);
            }
            long current = scheduler.rate();
            long next = control.next(node.capacity(direction), current, seen);
            scheduler.setRates(next, control.shared(next), now);
            tally(direction).add(control.step(), Math.round(seconds * 1e9), current, next);
            sides[direction.ordinal()] = new Side(interval.bytes() / seconds, interval.heldFraction(), control.skew(),
                    control.seenSkew(), control.step());
        }
        last = new Last(cpuBusy, diskBusy, sides[Direction.READ.ordinal()], sides[Direction.WRITE.ordinal()]);
    }
}
