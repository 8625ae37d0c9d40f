package org.vnodesync.dnthrottle;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A DataNode in simulated time, deterministic: transfer threads move packets through one bottleneck
 * server (the disk or the CPU) that serves every packet in flight at once, equally (processor
 * sharing: left alone it splits 1:1 per connection, as a real node does), each thread also capped by
 * its own client's speed. After each packet the thread calls the scheduler exactly as UserThrottler
 * does (admit, then sleep in slices with a recheck), so what is tested is the scheduler's code on the
 * real per-packet path, without real time. A CapacityLoop runs every 100 ms, told how busy the
 * server was (the share of its capacity in use, as a disk's io_ticks or a CPU's busy time say).
 */
final class SimulatedNode {
    static final long PACKET = 64 * 1024;
    static final long MS = 1_000_000L;
    static final long SECOND = 1_000_000_000L;

    /** What one thread does: packets back to back, or files with idle gaps between them. */
    static final class Worker {
        final Throttles.Charge charge;
        final Direction direction;
        final double clientBps;          // the client's own speed (infinity: none)
        final long fileBytes;            // 0: never pauses
        final long gapNs;
        double cost = 1;                 // server time per byte against a plain packet's (its client on the same CPU)
        int stallEvery;                  // every this many packets its thread stalls in flight (0: never)
        long stallNs;                    // for this long (preempted)
        long packets;
        long stallUntil;
        long startAt;                    // when its next file (or its first packet) starts
        final List<long[]> transfers = new ArrayList<>();   // {start, end} of each file

        final WeightedScheduler.Ticket ticket = new WeightedScheduler.Ticket();
        double remaining;                // bytes of the packet in flight
        long fileLeft;
        long fileStart;
        long due;                        // waiting until (if waiting)
        long wakeAt = Long.MAX_VALUE;
        boolean inFlight;
        boolean stopped;

        Worker(Throttles.Charge charge, double clientBps, long fileBytes, long gapNs, long startAt) {
            this(charge, Direction.READ, clientBps, fileBytes, gapNs, startAt);
        }

        Worker(Throttles.Charge charge, Direction direction, double clientBps, long fileBytes, long gapNs,
                long startAt) {
            this.charge = charge;
            this.direction = direction;
            this.clientBps = clientBps;
            this.fileBytes = fileBytes;
            this.gapNs = gapNs;
            this.startAt = startAt;
        }
    }

    final Throttles throttles;
    private double serverBps;
    private double otherCpu;         // the CPU's busy fraction from other processes
    private final List<Worker> workers = new ArrayList<>();
    private final Map<String, Long> moved = new HashMap<>();
    private final CapacityLoop capacity;
    private final boolean controlCapacity;
    private long now = SECOND;
    private double servedBytes;
    private long lastTick;

    private final boolean cpuBound;

    /** SERVER_BPS: what the node really delivers; CONTROL: run the CapacityLoop (else R stays as applied). */
    SimulatedNode(double serverBps, boolean control) {
        this(serverBps, control, false);
    }

    /** CPU_BOUND: the server is the node's CPU (its busy fraction read as /proc/stat's), not a data disk. */
    SimulatedNode(double serverBps, boolean control, boolean cpuBound) {
        this.throttles = new Throttles(Policy.Shares.NONE, 0, this::now);
        this.serverBps = serverBps;
        this.controlCapacity = control;
        this.cpuBound = cpuBound;
        this.capacity = new CapacityLoop(throttles, null);
        this.lastTick = now;
    }

    long now() {
        return now;
    }

    /** What the node delivers from now on. */
    void setServerBps(double bps) {
        serverBps = bps;
    }

    /**
     * Other processes keep the node's CPU this busy (0..1) from now on: /proc/stat counts the whole
     * machine, so the CPU reads at least this busy whatever the flows do.
     */
    void setOtherCpu(double busy) {
        otherCpu = busy;
    }

    Worker backlogged(String user) {
        return backlogged(user, Direction.READ);
    }

    Worker backlogged(String user, Direction direction) {
        return add(new Worker(throttles.chargeFor(user), direction, Double.POSITIVE_INFINITY, 0, 0, now));
    }

    /** A stopped worker goes on from NOW (its op's next packet). */
    void restart(Worker worker) {
        worker.stopped = false;
        worker.startAt = now;
        worker.ticket.releasedNs = 0;   // a new op
        worker.ticket.paces = 0;
    }

    Worker add(Worker worker) {
        workers.add(worker);
        return worker;
    }

    long moved(String user) {
        return moved.getOrDefault(user, 0L);
    }

    /** Bytes/s each user moved over the next SECONDS of simulated time. */
    Map<String, Double> rates(double seconds) {
        Map<String, Long> before = new HashMap<>(moved);
        long start = now;
        runFor((long) (seconds * SECOND));
        Map<String, Double> out = new HashMap<>();
        moved.forEach((user, bytes) -> out.put(user, (bytes - before.getOrDefault(user, 0L)) / ((now - start) / 1e9)));
        return out;
    }

    void stop(Worker worker) {
        worker.stopped = true;
    }

    void runFor(long ns) {
        long end = now + ns;
        while (now < end) {
            step(end);
        }
    }

    private void step(long end) {
        // Start whatever is due to start.
        for (Worker w : workers) {
            if (!w.stopped && !w.inFlight && w.wakeAt == Long.MAX_VALUE && w.startAt <= now) {
                if (w.fileBytes > 0 && w.fileLeft == 0) {
                    w.fileLeft = w.fileBytes;
                    w.fileStart = now;
                }
                w.inFlight = true;
                w.remaining = w.fileBytes > 0 ? Math.min(PACKET, w.fileLeft) : PACKET;
                if (w.stallEvery > 0 && ++w.packets % w.stallEvery == 0) {
                    w.stallUntil = now + w.stallNs;
                }
            }
        }
        double[] rates = serviceRates();
        long next = Math.min(end, lastTick + CapacityLoop.PERIOD_NS);
        for (int i = 0; i < workers.size(); i++) {
            Worker w = workers.get(i);
            if (w.inFlight && w.stallUntil > now) {
                next = Math.min(next, w.stallUntil);
            } else if (w.inFlight && rates[i] > 0) {
                next = Math.min(next, now + Math.max(1, (long) Math.ceil(w.remaining / rates[i] * 1e9)));
            } else if (w.wakeAt != Long.MAX_VALUE) {
                next = Math.min(next, w.wakeAt);
            } else if (!w.stopped && !w.inFlight && w.startAt > now) {
                next = Math.min(next, w.startAt);
            }
        }
        long dt = next - now;
        for (int i = 0; i < workers.size(); i++) {
            Worker w = workers.get(i);
            if (w.inFlight) {
                w.remaining -= rates[i] * dt / 1e9;
                servedBytes += rates[i] * w.cost * dt / 1e9;
            }
        }
        now = next;
        for (Worker w : workers) {
            if (w.inFlight && w.remaining <= 1e-6) {
                packetDone(w);
            } else if (w.wakeAt <= now) {
                woke(w);
            }
        }
        if (now >= lastTick + CapacityLoop.PERIOD_NS) {
            tick();
        }
    }

    private void packetDone(Worker w) {
        w.inFlight = false;
        long bytes = w.fileBytes > 0 ? Math.min(PACKET, w.fileLeft) : PACKET;
        moved.merge(w.charge.name(), bytes, Long::sum);
        w.charge.counters().addBytes(w.direction, bytes);
        WeightedScheduler scheduler = throttles.scheduler(w.direction);
        w.due = scheduler.admit(w.charge.flow(w.direction), bytes, now, w.ticket);
        if (w.fileBytes > 0) {
            w.fileLeft -= bytes;
            if (w.fileLeft == 0) {
                w.transfers.add(new long[] {w.fileStart, now});   // the client has its last byte
            }
        }
        sleepOrGo(w);
    }

    private void woke(Worker w) {
        w.wakeAt = Long.MAX_VALUE;
        w.due = throttles.scheduler(w.direction).recheck(w.charge.flow(w.direction), now, w.ticket);
        sleepOrGo(w);
    }

    private void sleepOrGo(Worker w) {
        if (w.due - now >= WeightedScheduler.LEAST_SLEEP_NS) {
            w.wakeAt = Math.min(w.due, now + WeightedScheduler.MAX_SLICE_NS);
            return;
        }
        w.ticket.released(now);
        if (w.fileBytes > 0 && w.fileLeft == 0) {
            throttles.scheduler(w.direction).release(w.charge.flow(w.direction), w.ticket);
            w.startAt = now + w.gapNs;
            w.ticket.releasedNs = 0;
            w.ticket.paces = 0;
        } else {
            w.startAt = now;
        }
    }

    /**
     * Processor sharing with each thread capped by its client: water-filling of the server's time over
     * the packets in flight (a stalled one takes none); a worker's bytes cost its COST in server time.
     */
    private double[] serviceRates() {
        double[] rates = new double[workers.size()];
        List<Integer> open = new ArrayList<>();
        for (int i = 0; i < workers.size(); i++) {
            if (workers.get(i).inFlight && workers.get(i).stallUntil <= now) {
                open.add(i);
            }
        }
        double left = serverBps;
        open.sort((a, b) -> Double.compare(workers.get(a).clientBps * workers.get(a).cost,
                workers.get(b).clientBps * workers.get(b).cost));
        for (int k = 0; k < open.size(); k++) {
            double even = left / (open.size() - k);
            Worker w = workers.get(open.get(k));
            rates[open.get(k)] = Math.min(even / w.cost, w.clientBps);
            left -= rates[open.get(k)] * w.cost;
        }
        return rates;
    }

    private void tick() {
        if (controlCapacity) {
            // Busy as a disk's io_ticks: the share of the server's capacity in use; the CPU as busy as
            // other processes keep it. A CPU-bound node's server is its CPU.
            double used = servedBytes / (serverBps * (now - lastTick) / 1e9);
            if (cpuBound) {
                capacity.tickWith(now, Math.min(1, otherCpu + used), 0, 0);
            } else {
                capacity.tickWith(now, otherCpu, used, 0);
            }
        }
        servedBytes = 0;
        lastTick = now;
    }
}
