package org.vnodesync.dnthrottle;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.IntToDoubleFunction;

/**
 * A DataNode in simulated time, deterministic, for the edge's model (docs/edge.md): transfer threads
 * move 64 KiB packets through the node's resources, which share themselves as a fair kernel does
 * (max-min by progressive filling): each data volume serves its packets in flight, reads and writes
 * alike, at its speed (which may grow with the number in flight: a disk that reorders a deeper queue);
 * the CPU's cores serve every packet's CPU time, one core at most per thread; a link may bind; each
 * thread's client has a speed of its own. A read the DataNode reads ahead through the dispatcher passes
 * through two resources as the agent's does (docs/edge.md, section 1 items 5-7): its pieces at the volume,
 * then each packet's copy and send (the cores, its send, the link) in a slot of the volume's packets'
 * dispatcher; a page cache keeps the pages of files that are read again. Each thread asks the real Dispatcher before each packet
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

    /** How the DataNode's read-ahead reaches a volume (readAhead sets how far ahead it reads). */
    enum ReadAhead {
        /** A window kept full ahead of each reader, whatever the dispatcher does (the model before requests). */
        WINDOW,
        /**
         * Hadoop's requests (ReadaheadPool.readaheadStream, before each packet): from the reader's position,
         * the read-ahead's length, each time it passes the halfway mark of its last; one not started yet is
         * cancelled by the next. The volume reads each as it is submitted, unordered (A4).
         */
        REQUESTS,
        /**
         * The same requests read through the volume's dispatcher, as ReadAhead does: each moves the end the
         * reader's read-ahead wants, and one reader a thread reads up to it in pieces, each a slot under its
         * user's weight, tagged with its bytes and held until they are read, competing for the slot its last
         * frees; the thread's packets then take no slot (their bytes are the read-ahead's).
         */
        DISPATCHED
    }

    /** One read-ahead request's disk read, or a piece of it, at the volume. */
    static final class ReadPiece {
        final Dispatcher.Ticket ticket;   // null: unordered
        final long bytes;
        final long end;                   // it covers its file up to this
        final boolean cached;             // its pages are in the page cache: it costs the volume nothing
        final boolean slotless;           // DISPATCHED: a piece asked with no slot (the disk outpaces the packets)
        final long askedNs;
        double left;

        ReadPiece(Dispatcher.Ticket ticket, long bytes, long end, boolean cached, boolean slotless, long askedNs) {
            this.ticket = ticket;
            this.bytes = bytes;
            this.end = end;
            this.cached = cached;
            this.slotless = slotless;
            this.askedNs = askedNs;
            this.left = bytes;
        }
    }

    /** A file of a worker's, the page cache's unit: the INDEX-th of the files it reads in turn. */
    private record CachedFile(Worker worker, int index) {
    }

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
         * Core-seconds per byte its client spends on the node's cores (a client on the same host: its
         * receive and checksums, no user's: A5), in a thread of its own, so at most a core too. Only a
         * read's copy and send (copies) is charged it.
         */
        double clientCpuPerByte;
        /** The files it reads in turn, each re-read the next round (0: every file a new one, never re-read). */
        int files;
        private int fileIndex;
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
        // Read-ahead requests (ReadAhead.REQUESTS, DISPATCHED): offsets into its current file.
        long position;                 // where its next packet reads
        long lastRequestAt = Long.MIN_VALUE;   // the offset of its last request (Hadoop's lastReadahead)
        long coveredTo;                // what its requests submitted (or its pieces dispatched) read up to
        long wantedTo;                 // DISPATCHED: the end of its last request
        Dispatcher.Ticket[] readers;   // DISPATCHED: its read-ahead reader's tickets at the volume (null: none)
        long asked;                    // the piece a reader's ticket waits for a slot for (0: none waits)
        long askedEnd;                 // ...which covers its file up to this
        Dispatcher.Ticket askedBy;     // that ticket
        final ArrayDeque<ReadPiece> reading = new ArrayDeque<>();   // pieces at the volume, in file order
        long moved;
        // copies: its packet's copy and send, after its bytes are read ahead (docs/edge.md section 1, item 6).
        long packetBytes;              // the packet in flight's bytes
        boolean copying;               // its copy and send are running (in a slot of the packets' dispatcher)
        double copyLeft;
        boolean held;                  // its ticket holds a slot of the packets' dispatcher
        boolean waitingToCopy;         // its ticket waits for a packets' slot for the packet whose bytes are read
        // copies: as ReadAhead.diskBinds, its op's pieces' mean bytes and time at the disk, and the last verdict.
        double diskBytes;
        double diskNs;
        long lastReadNs;
        boolean diskBinds = true;

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
     * consumed, as readAheadKind says: unordered (WINDOW, REQUESTS: the volume reads it whether or not its
     * thread holds a slot) or through the dispatcher (DISPATCHED); its thread's packet waits for its bytes
     * there, then costs the volume nothing more.
     */
    private long readAheadBytes;
    private ReadAhead readAheadKind = ReadAhead.WINDOW;
    /** DISPATCHED: the reader asks for its disk reads in pieces of this many bytes (0: a slice of the volume, Dispatcher.pieceBytes). */
    private long readAheadPiece;
    /**
     * DISPATCHED: whether a read's packets take slots of the volume's packets' dispatcher for their copy and
     * send, and an op whose pieces the disk reads faster than its packets go out reads them with no slot
     * (ReadAhead.diskBinds), as the agent does (read58c); false: its packets take no slot and its pieces always
     * take the disk's (branch ra58b). Either way the copy and send cost the cores their bytes' CPU.
     */
    private boolean packetSlots = true;
    /**
     * The page cache, bytes (0: none): what the read-ahead read of the files that workers re-read (Worker.files)
     * stays there, least recently used file out first, and a piece whose pages are there costs the volume
     * nothing (read at memory speed: at once). Only read-ahead reads fill it and find it (REQUESTS,
     * DISPATCHED); a write's pages and a file read once (the drawn scenarios': Hadoop's drop-behind) are not kept.
     */
    private long pageCacheBytes;
    private long pageCacheUsed;
    private final Map<CachedFile, long[]> pageCache = new LinkedHashMap<>(16, 0.75f, true);   // file -> {cached up to}

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

    void readAhead(long bytes, ReadAhead kind, long pieceBytes) {
        readAheadBytes = bytes;
        readAheadKind = kind;
        readAheadPiece = pieceBytes;
    }

    void packetSlots(boolean on) {
        packetSlots = on;
    }

    void pageCache(long bytes) {
        pageCacheBytes = bytes;
    }

    /** Whether W's packets are copied from what its read-ahead read through the dispatcher, then sent (DISPATCHED). */
    private boolean copies(Worker w) {
        return readsAhead(w) && readAheadKind == ReadAhead.DISPATCHED;
    }

    /** Whether W's read-ahead is Hadoop's requests rather than a window kept full. */
    private boolean requests(Worker w) {
        return readsAhead(w) && readAheadKind != ReadAhead.WINDOW;
    }

    /** Whether W's packets ask the dispatcher (not a reader whose read-ahead requests do). */
    private boolean packetsAsk(Worker w) {
        return !(readsAhead(w) && readAheadKind == ReadAhead.DISPATCHED);
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
        if (requests(w)) {
            return !w.reading.isEmpty() && !w.reading.peek().cached;
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
        return w.direction == Direction.READ && !readSlotCoversSend && packetsAsk(w);
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
        cancelRequest(worker);   // BlockSender.close cancels its read-ahead
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
        int n = workers.size();
        double[] rates = rates();
        long next = Math.min(end, lastTick + DepthLoop.PERIOD_NS);
        for (int i = 0; i < n; i++) {
            Worker w = workers.get(i);
            if (requests(w) && !w.reading.isEmpty() && w.reading.peek().cached) {
                next = now + 1;   // a piece of cached pages: read at memory speed
            } else if (requests(w) && atVolume(w) && rates[i] > 0) {
                next = Math.min(next, now + Math.max(1, (long) Math.ceil(w.reading.peek().left / rates[i] * 1e9)));
            } else if (readsAhead(w) && atVolume(w) && rates[i] > 0) {
                next = Math.min(next, now + Math.max(1, (long) Math.ceil((aheadTarget(w) - w.ahead) / rates[i] * 1e9)));
            }
            if (copies(w)) {
                if (w.copying && rates[n + i] > 0) {
                    next = Math.min(next, now + Math.max(1, (long) Math.ceil(w.copyLeft / rates[n + i] * 1e9)));
                } else if (w.inFlight && !w.copying && !w.waitingToCopy && w.ahead >= w.packetBytes - 1e-6) {
                    next = now + 1;   // its bytes are in the page cache: its copy asks for its slot
                }
            } else if (readsAhead(w) && w.inFlight) {
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
        for (int i = 0; i < n; i++) {
            Worker w = workers.get(i);
            if (requests(w)) {
                ReadPiece piece = w.reading.peek();
                if (piece != null && (piece.cached || atVolume(w))) {
                    double read = piece.cached ? piece.left : Math.min(rates[i] * dt / 1e9, piece.left);
                    piece.left -= read;
                    w.ahead += read;
                    w.unread -= read;
                }
            } else if (readsAhead(w)) {
                double read = Math.min(rates[i] * dt / 1e9, w.unread);
                w.ahead += read;
                w.unread -= read;
            } else if (w.inFlight) {
                w.remaining -= rates[i] * dt / 1e9;
            }
            if (w.copying) {
                w.copyLeft -= Double.isInfinite(rates[n + i]) ? w.copyLeft : rates[n + i] * dt / 1e9;
            }
        }
        now = next;
        for (Worker w : workers) {
            if (requests(w) && !w.reading.isEmpty() && w.reading.peek().left <= 1e-6) {
                pieceRead(w);
            }
        }
        for (Worker w : workers) {
            if (copies(w) && w.copying && w.copyLeft <= 1e-6) {
                copied(w);
            } else if (copies(w) && w.inFlight && !w.copying && !w.waitingToCopy && w.ahead >= w.packetBytes - 1e-6) {
                readAheadRead(w);
            } else if (!copies(w) && readsAhead(w) && w.inFlight && w.ahead >= w.remaining - 1e-6) {
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
            for (Dispatcher d : throttles.dispatchers()) {
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
            w.position = 0;
            w.lastRequestAt = Long.MIN_VALUE;
            w.coveredTo = 0;
            w.wantedTo = 0;
            if (w.spread != null) {
                w.volume = w.spread[w.nextVolume++ % w.spread.length];
            }
            w.fileIndex = w.files > 0 ? (w.fileIndex + 1) % w.files : 0;
        }
        Throttles.Charge charge = throttles.chargeFor(w.user);
        // Reading ahead through the dispatcher, the op's packets take the slots of the volume's packets'.
        Dispatcher d = copies(w) ? throttles.packets(w.volume.id) : throttles.volume(w.volume.id);
        w.ticket = new Dispatcher.Ticket(throttles.flow(d, charge), w.direction, Thread.currentThread());
        w.held = false;
        w.waitingToCopy = false;
        w.diskBytes = 0;   // a ReadAhead an op
        w.diskNs = 0;
        w.lastBytes = 0;
        askNext(w, 0);
    }

    /** As UserThrottler.next: the ceiling, then the volume's turn (the op moved BYTES before). */
    private void askNext(Worker w, long bytes) {
        Throttles.Charge charge = throttles.chargeFor(w.user);
        UserShare share = charge.share(w.direction);
        if (copies(w)) {
            // As UserThrottler.next reading ahead: the ceiling, then the packets' slot (ra58b: none), then go.
            double weight = packetSlots ? share.weight : 0;
            long ceilingNs = share.ceiling.unlimited() || bytes == 0 ? 0 : share.ceiling.reserve(bytes, now);
            if (ceilingNs > 0 || weight <= 0) {
                releasePacketSlot(w, bytes);
                if (ceilingNs > 0) {
                    w.sleeping = true;
                    w.wakeAt = now + ceilingNs;
                    return;
                }
                go(w);
                return;
            }
            askPacketSlot(w, w.held ? bytes : 0, weight, false);
            return;
        }
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

    /** W's ticket asks the packets' dispatcher for a slot (its last packet's BYTES counted): then go, or its copy. */
    private void askPacketSlot(Worker w, long bytes, double weight, boolean toCopy) {
        if (throttles.packets(w.volume.id).ask(w.ticket, bytes, weight, false, now)) {
            w.held = true;
            if (toCopy) {
                startCopy(w);
            } else {
                go(w);
            }
            return;
        }
        w.held = false;
        w.waiting = true;
        w.waitingToCopy = toCopy;
        poll(w);
    }

    private void releasePacketSlot(Worker w, long bytes) {
        if (w.held) {
            throttles.packets(w.volume.id).release(w.ticket, bytes, now);
            w.held = false;
        }
    }

    /**
     * As UserThrottler.awaitReadAhead: W's packet's bytes are read ahead; its copy asks for a packets' slot
     * if it gave its own up while it waited (ra58b: none).
     */
    private void readAheadRead(Worker w) {
        double weight = packetSlots ? throttles.chargeFor(w.user).share(Direction.READ).weight : 0;
        if (w.held || weight <= 0) {
            startCopy(w);
            return;
        }
        askPacketSlot(w, 0, weight, true);
    }

    private void startCopy(Worker w) {
        w.copying = true;
        w.copyLeft = w.packetBytes;
    }

    /** W's packet is copied and sent: the client has it. As afterPacket, for a packet of copies. */
    private void copied(Worker w) {
        w.copying = false;
        w.inFlight = false;
        long bytes = w.packetBytes;
        w.ahead = Math.max(0, w.ahead - bytes);
        w.position += bytes;
        w.moved += bytes;
        throttles.chargeFor(w.user).counters().addBytes(w.direction, bytes);
        if (w.fileBytes > 0) {
            w.fileLeft -= bytes;
            if (w.fileLeft == 0) {
                w.transfers.add(new long[] {w.fileStart, now});
                releasePacketSlot(w, bytes);
                cancelRequest(w);
                w.startAt = now + w.gapNs;
                return;
            }
        }
        if (w.stopped) {
            releasePacketSlot(w, bytes);
            return;
        }
        askNext(w, bytes);
    }

    private void poll(Worker w) {
        w.wakeAt = Long.MAX_VALUE;   // parked until the packet that frees its slot dispatches it
    }

    /** Waiting workers whose packets the dispatcher let go. */
    private void dispatched() {
        for (Worker w : workers) {
            if (w.asked > 0 && w.askedBy.go) {
                addPiece(w, w.askedBy, w.asked, w.askedEnd, false);
                w.asked = 0;
                topUp(w);
            }
            if (w.waiting && w.ticket.go) {
                w.waiting = false;
                w.wakeAt = Long.MAX_VALUE;
                if (copies(w)) {
                    w.held = true;
                }
                if (w.waitingToCopy) {
                    w.waitingToCopy = false;
                    startCopy(w);
                } else {
                    go(w);
                }
            }
        }
    }

    private void go(Worker w) {
        w.inFlight = true;
        w.remaining = w.fileBytes > 0 ? Math.min(PACKET, w.fileLeft) : PACKET;
        w.packetBytes = (long) w.remaining;
        if (requests(w)) {
            readaheadStream(w);   // BlockSender.manageOsCache, before the packet's read
        }
        if (copies(w)) {
            if (w.ahead >= w.packetBytes - 1e-6) {
                startCopy(w);
            } else {
                releasePacketSlot(w, 0);   // its wait at the disk holds no packets' slot (ReadAhead.afterStream)
            }
        }
    }

    /**
     * Hadoop's ReadaheadPool.readaheadStream at W's position: once it passes the halfway mark of its last
     * request, a new one wants the read-ahead's length from there (at least a packet, so that it covers the
     * packet about to be read). REQUESTS: the volume reads what earlier requests did not cover, as it is
     * submitted. DISPATCHED: the thread's reader reads up to the new end, a piece a slot (ReadAhead).
     */
    private void readaheadStream(Worker w) {
        long length = Math.max(readAheadBytes, PACKET);
        if (w.position < w.lastRequestAt + length / 2) {
            return;
        }
        w.lastRequestAt = w.position;
        long end = w.fileBytes > 0 ? Math.min(w.position + length, w.fileBytes) : w.position + length;
        UserShare share = throttles.chargeFor(w.user).share(Direction.READ);
        if (readAheadKind == ReadAhead.REQUESTS || share.weight <= 0) {
            long from = Math.max(w.position, w.coveredTo);
            if (end > from) {
                w.coveredTo = end;
                addPiece(w, null, end - from, end, false);
            }
            return;
        }
        w.wantedTo = Math.max(w.wantedTo, end);
        w.coveredTo = Math.max(w.coveredTo, w.position);
        if (w.readers == null) {
            Flow flow = throttles.flow(throttles.volume(w.volume.id), throttles.chargeFor(w.user));
            w.readers = new Dispatcher.Ticket[org.vnodesync.dnthrottle.ReadAhead.IN_FLIGHT];
            for (int i = 0; i < w.readers.length; i++) {
                w.readers[i] = Dispatcher.Ticket.piece(flow, Thread.currentThread());
            }
            w.diskBinds = true;   // ReadAhead.read: until a piece says otherwise
            w.lastReadNs = 0;
            readerNext(w, w.readers[0], 0);
        }
    }

    /** As ReadAhead.read with nothing of W's op at the disk: whether its next pieces take the disk's slots. */
    private boolean ordered(Worker w) {
        return !packetSlots || w.diskBinds || throttles.volume(w.volume.id).isAlone(w.readers[0].flow);
    }

    /**
     * As ReadAhead.read's loop with nothing of W's op at the disk, its TICKET's last piece of DONE bytes read:
     * the next piece waits for its turn at the disk (ordered), or, while the disk outpaces the op's packets
     * and another user moves at the volume, is asked with no slot, its tickets leaving the volume.
     */
    private void readerNext(Worker w, Dispatcher.Ticket ticket, long done) {
        if (ordered(w)) {
            nextPiece(w, ticket != null ? ticket : w.readers[0], done, true);
            topUp(w);
            return;
        }
        Dispatcher d = throttles.volume(w.volume.id);
        for (Dispatcher.Ticket t : w.readers) {
            d.release(t, t == ticket ? done : 0, now);
        }
        long rest = w.wantedTo - w.coveredTo;
        if (rest <= 0) {
            w.readers = null;
            return;
        }
        long piece = readAheadPiece > 0 ? Math.min(readAheadPiece, rest) : d.pieceBytes(w.readers[0].flow, rest);
        w.coveredTo += piece;
        addPiece(w, null, piece, w.coveredTo, true);
    }

    /** As ReadAhead.diskBinds: W's op's pieces (means) took longer at the disk than its packets' slots for as many bytes. */
    private boolean diskBinds(Worker w, long bytes, long ns) {
        w.diskBytes = Dispatcher.mean(w.diskBytes, bytes);
        w.diskNs = Dispatcher.mean(w.diskNs, ns);
        return org.vnodesync.dnthrottle.ReadAhead.slowerThanPackets(w.diskBytes, w.diskNs,
                throttles.packets(w.volume.id).serviceNs());   // the agent's class, not the enum here
    }

    /**
     * As ReadAhead.next: W's reader's TICKET, its last piece of DONE bytes read (0: none), asks for the next
     * piece (WAIT: none of the op's is at the volume, so it waits for its turn; else only into a free slot,
     * Dispatcher.offer). False if none was asked for: nothing more is wanted (with WAIT the reader ends) or
     * no slot was free; the ticket then leaves the volume.
     */
    private boolean nextPiece(Worker w, Dispatcher.Ticket ticket, long done, boolean wait) {
        long rest = w.wantedTo - w.coveredTo;
        Dispatcher d = throttles.volume(w.volume.id);
        if (rest <= 0) {
            d.release(ticket, done, now);
            if (wait) {
                w.readers = null;
            }
            return false;
        }
        long piece = readAheadPiece > 0 ? Math.min(readAheadPiece, rest) : d.pieceBytes(ticket.flow, rest);
        UserShare share = throttles.chargeFor(w.user).share(Direction.READ);
        if (wait) {
            w.coveredTo += piece;
            boolean reserved = !share.floor.unlimited() && share.floor.tryTake(piece, now);
            if (d.ask(ticket, done, piece, share.weight, reserved, now)) {
                addPiece(w, ticket, piece, w.coveredTo, false);
            } else {
                w.asked = piece;
                w.askedBy = ticket;
                w.askedEnd = w.coveredTo;
            }
            return true;
        }
        if (!d.offer(ticket, done, piece, share.weight, now)) {
            return false;
        }
        w.coveredTo += piece;
        addPiece(w, ticket, piece, w.coveredTo, false);
        return true;
    }

    /** A piece of W's file up to END is asked of the disk: its pages may be in the page cache already. */
    private void addPiece(Worker w, Dispatcher.Ticket ticket, long bytes, long end, boolean slotless) {
        long[] cached = w.files > 0 && pageCacheBytes > 0 ? pageCache.get(new CachedFile(w, w.fileIndex)) : null;
        w.reading.add(new ReadPiece(ticket, bytes, end, cached != null && cached[0] >= end, slotless, now));
    }

    /** W's piece up to END was read: a re-read file's pages stay in the page cache, the least recently used out first. */
    private void cache(Worker w, long end) {
        if (w.files == 0 || pageCacheBytes == 0 || w.fileBytes == 0) {
            return;
        }
        long[] cached = pageCache.computeIfAbsent(new CachedFile(w, w.fileIndex), k -> new long[1]);
        if (end > cached[0]) {
            pageCacheUsed += end - cached[0];
            cached[0] = end;
        }
        Iterator<long[]> lru = pageCache.values().iterator();
        while (pageCacheUsed > pageCacheBytes && lru.hasNext()) {
            long[] out = lru.next();
            if (out != cached) {
                pageCacheUsed -= out[0];
                lru.remove();
            }
        }
    }

    /** W's reader's pieces at the volume (dispatched, not yet read). */
    private int readersAtVolume(Worker w) {
        int n = 0;
        for (ReadPiece p : w.reading) {
            for (Dispatcher.Ticket t : w.readers) {
                n += p.ticket == t ? 1 : 0;
            }
        }
        return n;
    }

    /** As ReadAhead.read: while one of W's pieces is at the volume and a ticket is free, the next piece is offered. */
    private void topUp(Worker w) {
        while (w.readers != null && w.asked == 0 && ordered(w)) {
            int at = readersAtVolume(w);
            if (at == 0 || at >= w.readers.length) {
                return;
            }
            Dispatcher.Ticket free = null;
            for (Dispatcher.Ticket t : w.readers) {
                boolean busy = false;
                for (ReadPiece p : w.reading) {
                    busy |= p.ticket == t;
                }
                free = busy ? free : t;
            }
            if (!nextPiece(w, free, 0, false)) {
                return;
            }
        }
    }

    /** W's transfer ended (BlockSender.close): its reader asks for no more; a piece waiting leaves uncharged. */
    private void cancelRequest(Worker w) {
        if (w.readers == null) {
            return;
        }
        if (w.asked > 0) {
            throttles.volume(w.volume.id).cancel(w.askedBy, now);
            w.coveredTo -= w.asked;
            w.asked = 0;
        }
        w.wantedTo = w.coveredTo;
        w.readers = null;
    }

    /** The piece W's volume was reading is in the page cache: its reader asks for the next, or its slot is free. */
    private void pieceRead(Worker w) {
        ReadPiece piece = w.reading.poll();
        cache(w, piece.end);
        if (copies(w) && packetSlots) {
            // The disk's time for it: from when it was asked, or from the piece before it, queued ahead.
            w.diskBinds = diskBinds(w, piece.bytes, now - Math.max(piece.askedNs, w.lastReadNs));
            w.lastReadNs = now;
        }
        if (piece.slotless) {
            if (w.readers != null) {
                readerNext(w, null, 0);
            }
            return;
        }
        if (piece.ticket == null) {
            return;
        }
        if (w.readers != null && java.util.Arrays.asList(w.readers).contains(piece.ticket)) {
            if (readersAtVolume(w) == 0) {
                readerNext(w, piece.ticket, piece.bytes);
            } else if (ordered(w)) {
                nextPiece(w, piece.ticket, piece.bytes, false);
                topUp(w);
            } else {
                throttles.volume(w.volume.id).release(piece.ticket, piece.bytes, now);   // no second piece unordered
            }
            return;
        }
        throttles.volume(w.volume.id).release(piece.ticket, piece.bytes, now);
    }

    private void packetDone(Worker w) {
        w.inFlight = false;
        long bytes = w.fileBytes > 0 ? Math.min(PACKET, w.fileLeft) : PACKET;
        w.position += bytes;
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
                if (packetsAsk(w)) {
                    throttles.volume(w.volume.id).release(w.ticket, bytes, now);
                }
                cancelRequest(w);
                w.startAt = now + w.gapNs;
                return;
            }
        }
        if (w.stopped) {
            if (packetsAsk(w)) {
                throttles.volume(w.volume.id).release(w.ticket, bytes, now);
            }
            return;
        }
        askNext(w, bytes);
    }

    /**
     * The kernel's share of each resource among what is in flight, max-min by progressive filling: every
     * volume (its speed at that many in flight), the CPU's cores (one at most per thread), the link, each
     * client. Rates 0..n-1 are the workers' packets (or read-ahead pieces) at their volumes, n..2n-1 their
     * packets' copies and sends (copies: no volume; the thread's and its client's CPU, the net, the link).
     */
    private double[] rates() {
        int n = workers.size();
        int m = 2 * n;
        double[] rate = new double[m];
        boolean[] active = new boolean[m];
        Volume[] vol = new Volume[m];
        double[] cpu = new double[m];     // core-seconds a byte, on the shared cores
        double[] limit = new double[m];   // its own: its client, the net, a core for each of its threads
        boolean[] link = new boolean[m];
        Map<Volume, Integer> inFlight = new HashMap<>();
        for (int i = 0; i < n; i++) {
            Worker w = workers.get(i);
            if (atVolume(w)) {
                active[i] = true;
                vol[i] = w.volume;
                cpu[i] = copies(w) ? 0 : w.cpuPerByte;   // a disk read costs no CPU where its copy is charged it
                limit[i] = Math.min(clientAtVolume(w), w.cpuPerByte > 0 && !copies(w) ? 1 / w.cpuPerByte : Double.POSITIVE_INFINITY);
                link[i] = !copies(w);
                inFlight.merge(w.volume, 1, Integer::sum);
            }
            if (w.copying) {
                int j = n + i;
                cpu[j] = w.cpuPerByte + w.clientCpuPerByte;
                double core = Math.max(w.cpuPerByte, w.clientCpuPerByte);
                limit[j] = Math.min(Math.min(w.netBps, w.clientBps), core > 0 ? 1 / core : Double.POSITIVE_INFINITY);
                link[j] = true;
                if (cpu[j] == 0 && limit[j] == Double.POSITIVE_INFINITY && linkBps == Double.POSITIVE_INFINITY) {
                    rate[j] = Double.POSITIVE_INFINITY;   // nothing holds it: done at once
                } else {
                    active[j] = true;
                }
            }
        }
        boolean[] frozen = new boolean[m];
        for (int j = 0; j < m; j++) {
            frozen[j] = !active[j];
        }
        while (true) {
            double delta = Double.POSITIVE_INFINITY;
            int open = 0;
            double cpuOpen = 0;
            double cpuUsed = 0;
            double linkOpen = 0;
            double linkUsed = 0;
            Map<Volume, double[]> used = new HashMap<>();   // {open, used}
            for (int j = 0; j < m; j++) {
                if (!active[j]) {
                    continue;
                }
                double[] v = vol[j] != null ? used.computeIfAbsent(vol[j], k -> new double[2]) : null;
                if (v != null) {
                    v[1] += rate[j];
                }
                cpuUsed += rate[j] * cpu[j];
                linkUsed += link[j] ? rate[j] : 0;
                if (!frozen[j]) {
                    open++;
                    if (v != null) {
                        v[0]++;
                    }
                    cpuOpen += cpu[j];
                    linkOpen += link[j] ? 1 : 0;
                    delta = Math.min(delta, limit[j] - rate[j]);
                }
            }
            if (open == 0) {
                return rate;
            }
            for (Map.Entry<Volume, double[]> e : used.entrySet()) {
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
            for (int j = 0; j < m; j++) {
                if (!frozen[j]) {
                    rate[j] += delta;
                }
            }
            // Freeze what a binding constraint holds.
            double eps = 1e-9;
            cpuUsed = 0;
            linkUsed = 0;
            Map<Volume, Double> volUsed = new HashMap<>();
            for (int j = 0; j < m; j++) {
                if (active[j]) {
                    if (vol[j] != null) {
                        volUsed.merge(vol[j], rate[j], Double::sum);
                    }
                    cpuUsed += rate[j] * cpu[j];
                    linkUsed += link[j] ? rate[j] : 0;
                }
            }
            boolean cpuFull = cpuUsed >= cores * (1 - eps);
            boolean linkFull = linkBps < Double.POSITIVE_INFINITY && linkUsed >= linkBps * (1 - eps);
            boolean any = false;
            for (int j = 0; j < m; j++) {
                if (frozen[j]) {
                    continue;
                }
                boolean volFull = vol[j] != null && volUsed.get(vol[j])
                        >= vol[j].bps * vol[j].gain.applyAsDouble(inFlight.get(vol[j])) * (1 - eps);
                if (rate[j] >= limit[j] * (1 - eps) || volFull || (cpu[j] > 0 && cpuFull) || (link[j] && linkFull)) {
                    frozen[j] = true;
                    any = true;
                }
            }
            if (!any) {
                return rate;   // nothing binds: numerically done
            }
        }
    }
}
