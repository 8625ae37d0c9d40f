package org.vnodesync.dnthrottle;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.IntToDoubleFunction;

/**
 * A DataNode in simulated time, deterministic, for the edge's model (docs/edge.md): transfer threads
 * move 64 KiB packets through the node's resources, which share themselves as a fair kernel does
 * (max-min by progressive filling): each data volume serves its packets in flight, reads and writes
 * alike, at its speed (which may grow with the number in flight: a disk that reorders a deeper queue);
 * the CPU's cores serve every packet's CPU time, one core at most per thread; a link may bind; each
 * thread's client has a speed of its own. Each thread asks the real Dispatcher before each packet
 * exactly as UserThrottler does (ceiling, floor, ask, then wait until dispatched), so
 * what is tested is the edge's code on its per-packet path, in simulated time.
 *
 * <p>Three ways to share, for baselines in the same run: NONE (no vnode-sync: every packet goes at
 * once), STATIC (Algorithm 1 caps: each user's ceiling is the node's configured capacity times its
 * weight over the active users' sum, no weights), WEIGHTS (the edge).
 */
final class SimulatedNode {
    static final long PACKET = 64 * 1024;
    static final long MS = 1_000_000L;
    static final long SECOND = 1_000_000_000L;

    enum Sharing { NONE, STATIC, WEIGHTS }

    /** One data volume: BPS with one packet in flight, times GAIN(n) with n in flight (1 for a plain disk). */
    static final class Volume {
        final String id;
        final double bps;
        final IntToDoubleFunction gain;

        Volume(String id, double bps, IntToDoubleFunction gain) {
            this.id = id;
            this.bps = bps;
            this.gain = gain;
        }
    }

    /** One thread: packets back to back, or files of FILE_BYTES with GAP_NS idle between them. */
    static final class Worker {
        final String user;
        final Direction direction;
        Volume volume;               // where its current file is
        Volume[] spread;             // if set, its files go to these volumes in turn (HDFS spreads blocks)
        private int nextVolume;
        final double clientBps;      // its client's own speed (infinity: none)
        final long fileBytes;        // 0: never pauses
        final long gapNs;
        double cpuPerByte;           // core-seconds per byte (0: no CPU)
        /**
         * Its own per-packet time outside the volume, as bytes/s (infinity: none): a read's send of the
         * packet it read, which its slot covers (UserThrottler: a read's slot covers read and send, so
         * the volume idles for it at depth 1); a write's receive of its next packet, which its slot does
         * not (G8: it leaves the volume, with anticipation, and asks again).
         */
        double netBps = Double.POSITIVE_INFINITY;
        long startAt;
        boolean finishing;             // a read's last packet is out of the volume and being sent
        double ahead;                  // read-ahead: bytes of its file in the page cache it has not consumed
        double unread = Double.POSITIVE_INFINITY;   // read-ahead: bytes of its file the volume has not read yet
        final List<long[]> transfers = new ArrayList<>();   // {start, end} of each file
        long moved;

        Dispatcher.Ticket ticket;
        boolean inFlight;
        boolean waiting;
        double remaining;
        long fileLeft;
        long fileStart;
        long wakeAt = Long.MAX_VALUE;  // a waiting thread polls, or a ceiling sleep ends
        boolean sleeping;              // waiting for its ceiling
        boolean sending;               // a read's send: its slot held, the volume not used
        boolean receiving;             // a write's wait for its next packet (and its ceiling), out of the volume
        long sentBytes;
        long lastBytes;
        boolean stopped;

        Worker(String user, Direction direction, Volume volume, double clientBps, long fileBytes, long gapNs,
               long startAt) {
            this.user = user;
            this.direction = direction;
            this.volume = volume;
            this.clientBps = clientBps;
            this.fileBytes = fileBytes;
            this.gapNs = gapNs;
            this.startAt = startAt;
        }
    }

    final Throttles throttles = new Throttles(Policy.Shares.NONE, 0);
    private final Sharing sharing;
    private final double cores;
    private double linkBps = Double.POSITIVE_INFINITY;
    private double configuredBps;
    private final Map<String, Volume> volumes = new HashMap<>();
    private final List<Worker> workers = new ArrayList<>();
    private final Map<String, Double> weights = new HashMap<>();
    private final Map<String, long[]> floors = new HashMap<>();
    private long now = SECOND;
    private long lastTick = now;
    /**
     * Whether a read's slot covers its packet's send as well as its read (Hadoop's transferTo: one call
     * for both, the client's speed in it) or the read only (a copy: the send, at the slower of the
     * thread's net and its client, is outside the volume, as a write's receive is).
     */
    private boolean readSlotCoversSend = true;
    /**
     * The DataNode's read-ahead (dfs.datanode.readahead.bytes, 4 MiB, where it loads Hadoop's native
     * library as production DataNodes do; 0: none, every read is the thread's own request at the volume).
     * With it a reader's file is read into the page cache up to this far ahead of what its thread
     * consumed, by the volume, whether or not its thread holds a slot (the dispatcher does not see it:
     * A4); its thread's packet waits for its bytes there, then costs the volume nothing more.
     */
    private long readAheadBytes;

    SimulatedNode(Sharing sharing, double cores) {
        this.sharing = sharing;
        this.cores = cores;
    }

    long now() {
        return now;
    }

    Volume volume(String id, double bps) {
        return volume(id, bps, n -> 1.0);
    }

    Volume volume(String id, double bps, IntToDoubleFunction gain) {
        Volume v = new Volume(id, bps, gain);
        volumes.put(id, v);
        return v;
    }

    /** A link all packets share (a node bound by its network). */
    void link(double bps) {
        linkBps = bps;
    }

    void readSlotCoversSend(boolean covers) {
        readSlotCoversSend = covers;
    }

    void readAhead(long bytes) {
        readAheadBytes = bytes;
    }

    /** Whether W reads through the read-ahead (its packets wait for bytes read ahead). */
    private boolean readsAhead(Worker w) {
        return w.direction == Direction.READ && readAheadBytes > 0;
    }

    /** Whether W has work at its volume now: a packet in flight, or (reading ahead) a window to fill. */
    private boolean atVolume(Worker w) {
        if (!readsAhead(w)) {
            return w.inFlight;
        }
        return w.unread > 1e-6 && (!w.stopped && w.ahead < readAheadBytes - 1e-6 || w.inFlight && w.ahead < w.remaining - 1e-6);
    }

    /** The bytes W's read-ahead holds once it stops: its window, or what its packet in flight needs. */
    private double aheadTarget(Worker w) {
        double target = Math.max(w.stopped ? 0 : readAheadBytes, w.inFlight ? w.remaining : 0);
        return Math.min(target, w.ahead + w.unread);
    }

    /** Whether W's slot covers only its packet's time at the volume (its client's time is outside). */
    private boolean slotAtVolumeOnly(Worker w) {
        return w.direction == Direction.READ && !readSlotCoversSend;
    }

    /** W's client's speed while its packet is at the volume (infinity: its client is served outside the slot). */
    private double clientAtVolume(Worker w) {
        return slotAtVolumeOnly(w) || readsAhead(w) ? Double.POSITIVE_INFINITY : w.clientBps;
    }

    /** What static caps divide (Algorithm 1's BW): the node's configured capacity. */
    void configured(double bps) {
        configuredBps = bps;
    }

    void weight(String user, double weight) {
        weights.put(user, weight);
        apply();
    }

    void floor(String user, long bps) {
        floors.put(user, new long[] {bps});
        apply();
    }

    Worker backlogged(String user, Direction direction, Volume volume) {
        return add(new Worker(user, direction, volume, Double.POSITIVE_INFINITY, 0, 0, now));
    }

    Worker add(Worker worker) {
        workers.add(worker);
        weights.putIfAbsent(worker.user, 1.0);
        apply();
        return worker;
    }

    void stop(Worker worker) {
        worker.stopped = true;
    }

    void restart(Worker worker) {
        worker.stopped = false;
        worker.startAt = now;
    }

    /** Bytes/s each user moved over the next SECONDS. */
    Map<String, Double> rates(double seconds) {
        Map<String, Long> before = moved();
        long start = now;
        runFor((long) (seconds * SECOND));
        Map<String, Double> out = new HashMap<>();
        moved().forEach((user, bytes) -> out.put(user, (bytes - before.getOrDefault(user, 0L)) / ((now - start) / 1e9)));
        return out;
    }

    Map<String, Long> moved() {
        Map<String, Long> out = new HashMap<>();
        for (Worker w : workers) {
            out.merge(w.user, w.moved, Long::sum);
        }
        return out;
    }

    /** The users' shares as the coordinator would send them: weights, or static caps of the configured capacity. */
    private void apply() {
        Map<String, Policy.Shares> users = new HashMap<>();
        double sum = 0;
        for (double w : weights.values()) {
            sum += w;
        }
        for (Map.Entry<String, Double> e : weights.entrySet()) {
            long floor = floors.containsKey(e.getKey()) ? floors.get(e.getKey())[0] : 0;
            Policy.Share share;
            if (sharing == Sharing.STATIC) {
                long cap = Math.max(1, Math.round(configuredBps * e.getValue() / sum));
                share = new Policy.Share(0, 0, cap);
            } else if (sharing == Sharing.WEIGHTS) {
                share = new Policy.Share(e.getValue(), floor, 0);
            } else {
                share = Policy.Share.NONE;
            }
            users.put(e.getKey(), new Policy.Shares(share, share));
        }
        throttles.apply(new Policy(1, Policy.Node.NONE, Policy.Shares.NONE, users, new HashMap<>(), new HashMap<>()));
    }

    void runFor(long ns) {
        long end = now + ns;
        while (now < end) {
            step(end);
        }
    }

    private void step(long end) {
        for (Worker w : workers) {
            if (!w.stopped && !w.inFlight && !w.waiting && !w.sleeping && !w.sending && !w.receiving
                    && w.startAt <= now) {
                startOp(w);
            }
        }
        double[] rates = rates();
        long next = Math.min(end, lastTick + DepthLoop.PERIOD_NS);
        for (int i = 0; i < workers.size(); i++) {
            Worker w = workers.get(i);
            if (readsAhead(w) && atVolume(w) && rates[i] > 0) {
                next = Math.min(next, now + Math.max(1, (long) Math.ceil((aheadTarget(w) - w.ahead) / rates[i] * 1e9)));
            }
            if (readsAhead(w) && w.inFlight) {
                if (w.ahead >= w.remaining - 1e-6) {
                    next = now + 1;   // its bytes are in the page cache: the packet is done
                }
            } else if (w.inFlight && rates[i] > 0) {
                next = Math.min(next, now + Math.max(1, (long) Math.ceil(w.remaining / rates[i] * 1e9)));
            }
            if (w.inFlight) {
                continue;
            } else if (w.waiting || w.sleeping || w.sending || w.receiving) {
                next = Math.min(next, w.wakeAt);
            } else if (!w.stopped && !w.inFlight && w.startAt > now) {
                next = Math.min(next, w.startAt);
            }
        }
        next = Math.max(next, now + 1);
        long dt = next - now;
        for (int i = 0; i < workers.size(); i++) {
            Worker w = workers.get(i);
            if (readsAhead(w)) {
                double read = Math.min(rates[i] * dt / 1e9, w.unread);
                w.ahead += read;
                w.unread -= read;
            } else if (w.inFlight) {
                w.remaining -= rates[i] * dt / 1e9;
            }
        }
        now = next;
        for (Worker w : workers) {
            if (readsAhead(w) && w.inFlight && w.ahead >= w.remaining - 1e-6) {
                w.ahead = Math.max(0, w.ahead - w.remaining);
                packetDone(w);
            } else if (!readsAhead(w) && w.inFlight && w.remaining <= 1e-6) {
                packetDone(w);
            } else if (w.sending && w.wakeAt <= now) {
                w.sending = false;
                w.wakeAt = Long.MAX_VALUE;
                if (w.finishing) {
                    finished(w, w.sentBytes);
                } else {
                    afterPacket(w, w.sentBytes);
                }
            } else if (w.receiving && w.wakeAt <= now) {
                w.receiving = false;
                w.wakeAt = Long.MAX_VALUE;
                askNext(w, 0);
            } else if (w.sleeping && w.wakeAt <= now) {
                w.sleeping = false;
                w.wakeAt = Long.MAX_VALUE;
                askNext(w, 0);
            } else if (w.waiting && w.wakeAt <= now) {
                poll(w);
            }
        }
        dispatched();
        if (now >= lastTick + DepthLoop.PERIOD_NS) {
            for (Dispatcher d : throttles.volumes()) {
                d.tick(now);
            }
            lastTick = now;
            dispatched();
        }
    }

    private void startOp(Worker w) {
        if (w.fileBytes > 0 && w.fileLeft == 0) {
            w.fileLeft = w.fileBytes;
            w.fileStart = now;
            w.ahead = 0;
            w.unread = w.fileBytes;
            if (w.spread != null) {
                w.volume = w.spread[w.nextVolume++ % w.spread.length];
            }
        }
        Throttles.Charge charge = throttles.chargeFor(w.user);
        Dispatcher d = throttles.volume(w.volume.id);
        w.ticket = new Dispatcher.Ticket(throttles.flow(d, charge), w.direction, Thread.currentThread());
        w.lastBytes = 0;
        askNext(w, 0);
    }

    /** As UserThrottler.next: the ceiling, then the volume's turn (the op moved BYTES before). */
    private void askNext(Worker w, long bytes) {
        Throttles.Charge charge = throttles.chargeFor(w.user);
        UserShare share = charge.share(w.direction);
        Dispatcher d = throttles.volume(w.volume.id);
        double weight = share.weight;
        long ceilingNs = share.ceiling.unlimited() || bytes == 0 ? 0 : share.ceiling.reserve(bytes, now);
        if (ceilingNs > 0 || weight <= 0) {
            d.release(w.ticket, bytes, now);
            bytes = 0;
            if (ceilingNs > 0) {
                w.sleeping = true;
                w.wakeAt = now + ceilingNs;
                return;
            }
            go(w);
            return;
        }
        long size = bytes > 0 ? bytes : Dispatcher.FIRST_PACKET_BYTES;
        boolean reserved = !share.floor.unlimited() && share.floor.tryTake(size, now);
        if (d.ask(w.ticket, bytes, weight, reserved, now)) {
            go(w);
        } else {
            w.waiting = true;
            poll(w);
        }
    }

    private void poll(Worker w) {
        w.wakeAt = Long.MAX_VALUE;   // parked until the packet that frees its slot dispatches it
    }

    /** Waiting workers whose packets the dispatcher let go. */
    private void dispatched() {
        for (Worker w : workers) {
            if (w.waiting && w.ticket.go) {
                w.waiting = false;
                w.wakeAt = Long.MAX_VALUE;
                go(w);
            }
        }
    }

    private void go(Worker w) {
        w.inFlight = true;
        w.remaining = w.fileBytes > 0 ? Math.min(PACKET, w.fileLeft) : PACKET;
    }

    private void packetDone(Worker w) {
        w.inFlight = false;
        long bytes = w.fileBytes > 0 ? Math.min(PACKET, w.fileLeft) : PACKET;
        w.moved += bytes;
        throttles.chargeFor(w.user).counters().addBytes(w.direction, bytes);
        if (slotAtVolumeOnly(w)) {
            // As UserThrottler with a read slot: leaveVolume after the read, then the send (at the slower
            // of the net and the client), then throttle (the ceiling), then the next read asks.
            double outside = Math.min(w.netBps, w.clientBps);
            long outNs = outside < Double.POSITIVE_INFINITY ? Math.max(1, (long) Math.ceil(bytes / outside * 1e9)) : 0;
            boolean last = w.stopped || (w.fileBytes > 0 && w.fileLeft == bytes);
            throttles.volume(w.volume.id).release(w.ticket, bytes, now, !last);
            if (last) {
                w.sending = true;
                w.finishing = true;
                w.sentBytes = bytes;
                w.wakeAt = now + outNs;
                return;
            }
            w.fileLeft -= w.fileBytes > 0 ? bytes : 0;
            UserShare share = throttles.chargeFor(w.user).share(w.direction);
            long ceilingNs = share.ceiling.unlimited() ? 0 : share.ceiling.reserve(bytes, now);
            w.receiving = true;
            w.wakeAt = now + outNs + ceilingNs;
            return;
        }
        if (readsAhead(w) && Math.min(w.netBps, w.clientBps) < Double.POSITIVE_INFINITY) {
            // Read ahead, the packet was a copy from the page cache: its send, at the slower of the net
            // and its client, is what its slot covers.
            w.sending = true;
            w.sentBytes = bytes;
            w.wakeAt = now + Math.max(1, (long) Math.ceil(bytes / Math.min(w.netBps, w.clientBps) * 1e9));
            return;
        }
        if (w.netBps < Double.POSITIVE_INFINITY) {
            long netNs = Math.max(1, (long) Math.ceil(bytes / w.netBps * 1e9));
            if (w.direction == Direction.READ) {
                w.sending = true;
                w.sentBytes = bytes;
                w.wakeAt = now + netNs;
                return;
            }
            boolean last = w.stopped || (w.fileBytes > 0 && w.fileLeft == bytes);
            if (!last) {
                // As UserThrottler: leaveVolume, then throttle (the ceiling), then the next packet's receive.
                w.fileLeft -= w.fileBytes > 0 ? bytes : 0;
                throttles.volume(w.volume.id).release(w.ticket, bytes, now, true);
                UserShare share = throttles.chargeFor(w.user).share(w.direction);
                long ceilingNs = share.ceiling.unlimited() ? 0 : share.ceiling.reserve(bytes, now);
                w.receiving = true;
                w.wakeAt = now + ceilingNs + netNs;
                return;
            }
        }
        afterPacket(w, bytes);
    }

    /** A read's last packet is sent (its slot was freed when its read ended): the transfer is over. */
    private void finished(Worker w, long bytes) {
        w.finishing = false;
        if (w.stopped) {
            return;
        }
        if (w.fileBytes > 0) {
            w.fileLeft -= bytes;
            w.transfers.add(new long[] {w.fileStart, now});
            w.startAt = now + w.gapNs;
            return;
        }
        startOp(w);
    }

    /** The rest of a packet's end, once it is out of the volume (and, a read, sent). */
    private void afterPacket(Worker w, long bytes) {
        if (w.fileBytes > 0) {
            w.fileLeft -= bytes;
            if (w.fileLeft == 0) {
                w.transfers.add(new long[] {w.fileStart, now});   // the client has its last byte
                throttles.volume(w.volume.id).release(w.ticket, bytes, now);
                w.startAt = now + w.gapNs;
                return;
            }
        }
        if (w.stopped) {
            throttles.volume(w.volume.id).release(w.ticket, bytes, now);
            return;
        }
        askNext(w, bytes);
    }

    /**
     * The kernel's share of each resource among the packets in flight, max-min by progressive filling:
     * every volume (its speed at that many in flight), the CPU's cores (one at most per thread), the
     * link, each client.
     */
    private double[] rates() {
        int n = workers.size();
        double[] rate = new double[n];
        boolean[] frozen = new boolean[n];
        Map<Volume, Integer> inFlight = new HashMap<>();
        for (int i = 0; i < n; i++) {
            Worker w = workers.get(i);
            frozen[i] = !atVolume(w);
            if (!frozen[i]) {
                inFlight.merge(w.volume, 1, Integer::sum);
            }
        }
        while (true) {
            double delta = Double.POSITIVE_INFINITY;
            int open = 0;
            double cpuOpen = 0;
            double cpuUsed = 0;
            double linkOpen = 0;
            double linkUsed = 0;
            Map<Volume, double[]> vol = new HashMap<>();   // {open, used}
            for (int i = 0; i < n; i++) {
                Worker w = workers.get(i);
                if (!atVolume(w)) {
                    continue;
                }
                double[] v = vol.computeIfAbsent(w.volume, k -> new double[2]);
                v[1] += rate[i];
                cpuUsed += rate[i] * w.cpuPerByte;
                linkUsed += rate[i];
                if (!frozen[i]) {
                    open++;
                    v[0]++;
                    cpuOpen += w.cpuPerByte;
                    linkOpen++;
                    delta = Math.min(delta, clientAtVolume(w) - rate[i]);
                    if (w.cpuPerByte > 0) {
                        delta = Math.min(delta, 1 / w.cpuPerByte - rate[i]);
                    }
                }
            }
            if (open == 0) {
                return rate;
            }
            for (Map.Entry<Volume, double[]> e : vol.entrySet()) {
                if (e.getValue()[0] > 0) {
                    double cap = e.getKey().bps * e.getKey().gain.applyAsDouble(inFlight.get(e.getKey()));
                    delta = Math.min(delta, (cap - e.getValue()[1]) / e.getValue()[0]);
                }
            }
            if (cpuOpen > 0) {
                delta = Math.min(delta, (cores - cpuUsed) / cpuOpen);
            }
            if (linkOpen > 0 && linkBps < Double.POSITIVE_INFINITY) {
                delta = Math.min(delta, (linkBps - linkUsed) / linkOpen);
            }
            delta = Math.max(0, delta);
            for (int i = 0; i < n; i++) {
                if (!frozen[i]) {
                    rate[i] += delta;
                }
            }
            // Freeze what a binding constraint holds.
            double eps = 1e-9;
            cpuUsed = 0;
            linkUsed = 0;
            Map<Volume, Double> volUsed = new HashMap<>();
            for (int i = 0; i < n; i++) {
                Worker w = workers.get(i);
                if (atVolume(w)) {
                    volUsed.merge(w.volume, rate[i], Double::sum);
                    cpuUsed += rate[i] * w.cpuPerByte;
                    linkUsed += rate[i];
                }
            }
            boolean cpuFull = cpuUsed >= cores * (1 - eps);
            boolean linkFull = linkBps < Double.POSITIVE_INFINITY && linkUsed >= linkBps * (1 - eps);
            boolean any = false;
            for (int i = 0; i < n; i++) {
                Worker w = workers.get(i);
                if (frozen[i]) {
                    continue;
                }
                double cap = w.volume.bps * w.volume.gain.applyAsDouble(inFlight.get(w.volume));
                if (rate[i] >= clientAtVolume(w) * (1 - eps) || volUsed.get(w.volume) >= cap * (1 - eps)
                        || (w.cpuPerByte > 0 && (cpuFull || rate[i] * w.cpuPerByte >= 1 - eps)) || linkFull) {
                    frozen[i] = true;
                    any = true;
                }
            }
            if (!any) {
                return rate;   // nothing binds: numerically done
            }
        }
    }
}
