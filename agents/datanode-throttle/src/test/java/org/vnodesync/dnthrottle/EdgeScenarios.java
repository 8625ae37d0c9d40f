package org.vnodesync.dnthrottle;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.function.IntToDoubleFunction;

/**
 * Issue 58's drawn-scenario benchmark on the model (SimulatedNode): for each seed it draws a profile and
 * 2-6 users, runs them under NONE, STATIC and WEIGHTS for the same simulated time, and prints one line
 * per scenario, then each figure's distribution over the seeds and its worst scenario, and how many
 * scenarios meet each of the issue's targets. Run by benchmarks/edge_model.py.
 *
 * <pre>
 *   java -cp ... org.vnodesync.dnthrottle.EdgeScenarios --seeds 0-99 [--profile a|b|c|d|e] [--seconds 60]
 *   java -cp ... org.vnodesync.dnthrottle.EdgeScenarios --trace SEED [--policy WEIGHTS] [--from 5 --to 15]
 * </pre>
 *
 * The model leaves out what the edge cannot see and the issue's real-HDFS runs measure: write-behind (a
 * write here is a read in the other direction), the client's own pipeline, seeks. Its page cache serves
 * only files read again (the drawn scenarios read each file once; the short-circuit case re-reads).
 */
final class EdgeScenarios {
    static final double MB = 1e6;
    static final long MIB = 1 << 20;
    static final long SECOND = SimulatedNode.SECOND;
    /** Simulated time before the window: long enough for Depth's first probes (10 intervals of 100 ms) and a few more. */
    static final long WARM_UP_NS = 5 * SECOND;
    /** A user alone: its window after the same warm-up. */
    static final long ALONE_NS = 20 * SECOND;
    /** Every profile's CPU: two cores, as the testbed's VM (profile d makes them bind). */
    static final double CORES = 2;
    /** A production DataNode's read-ahead: dfs.datanode.readahead.bytes's default (with Hadoop's native library). */
    static final long DATANODE_READ_AHEAD = 4 * MIB;

    enum Kind {
        BULK_READER("BR", Direction.READ, true), BULK_WRITER("BW", Direction.WRITE, true),
        INTERACTIVE_READER("IR", Direction.READ, false), INTERACTIVE_WRITER("IW", Direction.WRITE, false);

        final String code;
        final Direction direction;
        final boolean bulk;

        Kind(String code, Direction direction, boolean bulk) {
            this.code = code;
            this.direction = direction;
            this.bulk = bulk;
        }
    }

    /** One modelled data volume: BPS with one packet in flight, times gain(n) if it is HDD-like. */
    record VolumeSpec(String id, double bps, boolean hdd) {
        IntToDoubleFunction gain() {
            // An HDD that reorders a deeper queue: +20 % a packet more in flight, up to 1.6x (the issue's example).
            return hdd ? n -> Math.min(1.6, 1 + 0.2 * (n - 1)) : n -> 1.0;
        }
    }

    /**
     * One user: its kind, weight, threads; VOLUMES[t] is thread t's volume (bulk), or the volumes an
     * interactive user's files go to in turn. An interactive user moves FILE_BYTES, idles GAP_NS, again.
     */
    record UserSpec(String name, Kind kind, double weight, int threads, double clientBps, long fileBytes, long gapNs,
                    long firstAtNs, int[] volumes) {
        String describe() {
            StringBuilder s = new StringBuilder(name + ":" + kind.code + " w" + (int) weight);
            if (kind.bulk) {
                s.append(" x").append(threads);
                if (clientBps < Double.POSITIVE_INFINITY) {
                    s.append(String.format(Locale.ROOT, " client %.0f", clientBps / MB));
                }
            } else {
                s.append(String.format(Locale.ROOT, " %dMiB/%.1fs", fileBytes / MIB, gapNs / 1e9));
            }
            if (volumes.length > 1 || volumes[0] != 0) {
                s.append(" v").append(Arrays.toString(volumes).replace(" ", ""));
            }
            return s.toString();
        }
    }

    /**
     * NET_BPS: every thread's own per-packet time outside the volume, as bytes/s (infinity: none): a
     * read's send, which holds its slot, and a write's receive of its next packet, which does not
     * (SimulatedNode.Worker.netBps). READ_SLOT_COVERS_SEND: a read's slot covers its send too (Hadoop's
     * transferTo) rather than its read only (a copy; SimulatedNode.readSlotCoversSend). READ_AHEAD_BYTES:
     * the DataNode's read-ahead (SimulatedNode.readAhead; 0: none), READ_AHEAD how it reaches the volume,
     * READ_AHEAD_PIECE the pieces a dispatched request asks for (0: whole), PACKET_SLOTS whether a dispatched
     * read's packets take the volume's packets' slots for their copy and send (SimulatedNode.packetSlots).
     */
    record Scenario(long seed, String profile, List<VolumeSpec> volumes, double configuredBps, double cpuPerByte,
                    double linkBps, double netBps, boolean readSlotCoversSend, long readAheadBytes,
                    SimulatedNode.ReadAhead readAhead, long readAheadPiece, boolean packetSlots, List<UserSpec> users) {
        String describe() {
            StringBuilder s = new StringBuilder(profile + " [");
            for (VolumeSpec v : volumes) {
                s.append(String.format(Locale.ROOT, "%s%.0f%s ", v.id, v.bps / MB, v.hdd ? "hdd" : ""));
            }
            s.append(String.format(Locale.ROOT, "cfg %.0f", configuredBps / MB));
            if (cpuPerByte > 0) {
                s.append(String.format(Locale.ROOT, " core %.0f", 1 / cpuPerByte / MB));
            }
            if (linkBps < Double.POSITIVE_INFINITY) {
                s.append(String.format(Locale.ROOT, " link %.0f", linkBps / MB));
            }
            if (netBps < Double.POSITIVE_INFINITY) {
                s.append(String.format(Locale.ROOT, " net %.0f", netBps / MB));
            }
            return s.append("]").toString();
        }
    }

    /** What one policy's run measured in the window. */
    record Run(Map<String, Double> rate, Map<String, List<Double>> transferMs, double totalBps, double meanDepth) {
    }

    // ---- drawing

    /**
     * Seed's scenario; PROFILE null: profile "abcde"[seed % 5], so any 5k consecutive seeds cover each k
     * times. NET: threads have a per-packet time outside the volume, drawn log-uniform from 150 to
     * 1000 MB/s (the testbed's DataNodes send a 64 KiB packet at about 240 MB/s, leaving its 60 MB/s
     * disk a fifth idle at depth 1), from a stream of its own so that the rest of the draw is the same
     * with and without it.
     */
    static Scenario draw(long seed, String profile, boolean net, boolean readSlotCoversSend, long readAheadBytes) {
        return draw(seed, profile, net, readSlotCoversSend, readAheadBytes, SimulatedNode.ReadAhead.DISPATCHED, 0, true);
    }

    static Scenario draw(long seed, String profile, boolean net, boolean readSlotCoversSend, long readAheadBytes,
                         SimulatedNode.ReadAhead readAhead, long readAheadPiece, boolean packetSlots) {
        SplittableRandom netDraw = new SplittableRandom(seed * 0x9E3779B97F4A7C15L + 59);
        double netBps = net ? Math.exp(uniform(netDraw, Math.log(150), Math.log(1000))) * MB : Double.POSITIVE_INFINITY;
        SplittableRandom r = new SplittableRandom(seed * 0x9E3779B97F4A7C15L + 58);
        String p = profile != null ? profile : String.valueOf("abcde".charAt((int) Math.floorMod(seed, 5L)));
        List<VolumeSpec> volumes = new ArrayList<>();
        double configured;
        double cpuPerByte = 0;
        double link = Double.POSITIVE_INFINITY;
        switch (p) {
            case "a" -> {
                double bps = uniform(r, 60, 300) * MB;
                volumes.add(new VolumeSpec("v0", bps, false));
                int variant = r.nextInt(3);   // configured = the disk's speed, a quarter of it, four times it
                configured = bps * new double[] {1, 0.25, 4}[variant];
                p = "a" + new String[] {"=", "/4", "x4"}[variant];
            }
            case "b" -> {
                volumes.add(new VolumeSpec("v0", uniform(r, 30, 60) * MB, false));
                volumes.add(new VolumeSpec("v1", uniform(r, 80, 150) * MB, false));
                volumes.add(new VolumeSpec("v2", uniform(r, 200, 400) * MB, false));
                configured = volumes.stream().mapToDouble(VolumeSpec::bps).sum();
            }
            case "c" -> {
                double bps = uniform(r, 80, 150) * MB;
                volumes.add(new VolumeSpec("v0", bps, true));
                configured = 1.6 * bps;
            }
            case "d" -> {
                volumes.add(new VolumeSpec("v0", uniform(r, 400, 800) * MB, false));
                double perCore = uniform(r, 40, 100) * MB;   // 2 cores: 80-200 MB/s, below the disk
                cpuPerByte = 1 / perCore;
                configured = CORES * perCore;
            }
            case "e" -> {
                double bps = uniform(r, 150, 400) * MB;
                volumes.add(new VolumeSpec("v0", bps, false));
                link = uniform(r, 0.2, 0.6) * bps;
                configured = link;
            }
            default -> throw new IllegalArgumentException("profile " + p + ": not one of a, b, c, d, e");
        }
        int n = 2 + r.nextInt(5);
        Kind[] kinds = new Kind[n];
        double[] weights = new double[n];
        for (int i = 0; i < n; i++) {
            kinds[i] = Kind.values()[r.nextInt(4)];
            weights[i] = 1 + r.nextInt(16);
        }
        // At least one of each: a scenario without a bulk user measures no sharing, without an interactive one no latency.
        if (Arrays.stream(kinds).noneMatch(k -> k.bulk)) {
            kinds[r.nextInt(n)] = r.nextBoolean() ? Kind.BULK_READER : Kind.BULK_WRITER;
        }
        if (Arrays.stream(kinds).allMatch(k -> k.bulk)) {
            kinds[r.nextInt(n)] = r.nextBoolean() ? Kind.INTERACTIVE_READER : Kind.INTERACTIVE_WRITER;
        }
        // Far-apart weights in half the scenarios: one user at 1 beside one at 9-16.
        if (r.nextBoolean()) {
            int low = r.nextInt(n);
            int high = (low + 1 + r.nextInt(n - 1)) % n;
            weights[low] = 1;
            weights[high] = 9 + r.nextInt(8);
        }
        List<UserSpec> users = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Kind k = kinds[i];
            if (k.bulk) {
                int threads = 1 + r.nextInt(3);
                double client = r.nextInt(4) == 0 ? uniform(r, 10, 60) * MB : Double.POSITIVE_INFINITY;
                int[] vols = new int[threads];
                for (int t = 0; t < threads; t++) {
                    vols[t] = r.nextInt(volumes.size());
                }
                users.add(new UserSpec("u" + i, k, weights[i], threads, client, 0, 0, 0, vols));
            } else {
                long file = Math.round(Math.exp(uniform(r, 0, Math.log(64)))) * MIB;
                long gap = (long) (Math.exp(uniform(r, Math.log(0.2), Math.log(5))) * SECOND);
                long first = (long) (r.nextDouble() * gap);
                int[] vols = new int[volumes.size()];
                int from = r.nextInt(volumes.size());
                for (int v = 0; v < vols.length; v++) {
                    vols[v] = (from + v) % vols.length;
                }
                users.add(new UserSpec("u" + i, k, weights[i], 1, Double.POSITIVE_INFINITY, file, gap, first, vols));
            }
        }
        return new Scenario(seed, p, volumes, configured, cpuPerByte, link, netBps, readSlotCoversSend, readAheadBytes,
                readAhead, readAheadPiece, packetSlots, users);
    }

    private static double uniform(SplittableRandom r, double from, double to) {
        return from + (to - from) * r.nextDouble();
    }

    // ---- running

    /** A node of SCENARIO under SHARING with USERS on it (all of them, or one alone). */
    private static final class Model {
        final SimulatedNode node;
        final SimulatedNode.Volume[] volumes;
        final Map<String, List<SimulatedNode.Worker>> workers = new LinkedHashMap<>();

        Model(Scenario s, SimulatedNode.Sharing sharing, List<UserSpec> users) {
            node = new SimulatedNode(sharing, CORES);
            node.configured(s.configuredBps);
            node.readSlotCoversSend(s.readSlotCoversSend);
            node.readAhead(s.readAheadBytes, s.readAhead, s.readAheadPiece);
            node.packetSlots(s.packetSlots);
            if (s.linkBps < Double.POSITIVE_INFINITY) {
                node.link(s.linkBps);
            }
            volumes = new SimulatedNode.Volume[s.volumes.size()];
            for (int v = 0; v < volumes.length; v++) {
                VolumeSpec spec = s.volumes.get(v);
                volumes[v] = node.volume(spec.id, spec.bps, spec.gain());
            }
            for (UserSpec u : users) {
                node.weight(u.name, u.weight);
            }
            long t0 = node.now();
            for (UserSpec u : users) {
                List<SimulatedNode.Worker> mine = new ArrayList<>();
                for (int t = 0; t < u.threads; t++) {
                    SimulatedNode.Worker w = new SimulatedNode.Worker(u.name, u.kind.direction,
                            volumes[u.volumes[u.kind.bulk ? t : 0]], u.clientBps, u.fileBytes, u.gapNs, t0 + u.firstAtNs);
                    if (!u.kind.bulk) {
                        w.spread = Arrays.stream(u.volumes).mapToObj(v -> volumes[v]).toArray(SimulatedNode.Volume[]::new);
                    }
                    w.cpuPerByte = s.cpuPerByte;
                    w.netBps = s.netBps;
                    mine.add(node.add(w));
                }
                workers.put(u.name, mine);
            }
        }

        Map<String, Long> moved() {
            return node.moved();
        }
    }

    static Run run(Scenario s, SimulatedNode.Sharing sharing, List<UserSpec> users, long windowNs) {
        Model m = new Model(s, sharing, users);
        m.node.runFor(WARM_UP_NS);
        return measure(m, windowNs, null);
    }

    /** Runs M for WINDOW_NS and measures it; TRACE non-null prints each 100 ms interval to it. */
    private static Run measure(Model m, long windowNs, Trace trace) {
        long from = m.node.now();
        Map<String, Long> before = m.moved();
        double depths = 0;
        int samples = 0;
        while (m.node.now() < from + windowNs) {
            m.node.runFor(DepthLoop.PERIOD_NS);
            // The deepest volume's depth, each interval: how many packets share what binds.
            depths += m.node.throttles.volumes().stream().mapToInt(Dispatcher::depth).max().orElse(0);
            samples++;
            if (trace != null) {
                trace.interval(m);
            }
        }
        long to = m.node.now();
        double seconds = (to - from) / 1e9;
        Map<String, Double> rate = new LinkedHashMap<>();
        Map<String, List<Double>> transfers = new LinkedHashMap<>();
        double total = 0;
        Map<String, Long> after = m.moved();
        for (Map.Entry<String, List<SimulatedNode.Worker>> e : m.workers.entrySet()) {
            double bps = (after.get(e.getKey()) - before.getOrDefault(e.getKey(), 0L)) / seconds;
            rate.put(e.getKey(), bps);
            total += bps;
            List<Double> ms = new ArrayList<>();
            for (SimulatedNode.Worker w : e.getValue()) {
                if (w.fileBytes == 0) {
                    continue;
                }
                for (long[] t : w.transfers) {
                    if (t[0] >= from) {
                        ms.add((t[1] - t[0]) / 1e6);
                    }
                }
                // The transfer still running at the end counts for what it has taken so far: a lower bound,
                // so a policy that starves a user (static caps of a quarter's capacity) is not spared.
                if (w.fileLeft > 0 && w.fileStart >= from) {
                    ms.add((to - w.fileStart) / 1e6);
                }
            }
            if (!ms.isEmpty()) {
                Collections.sort(ms);
                transfers.put(e.getKey(), ms);
            }
        }
        return new Run(rate, transfers, total, depths / Math.max(1, samples));
    }

    // ---- the shares

    /** One user's traffic at one volume, for the water-filling: its weight and its own limit (bytes/s). */
    private record FlowAt(String user, int volume, double weight, double limit) {
    }

    /**
     * Each user's weighted max-min share of the node, by water-filling. A user's traffic at one volume is
     * one flow of its weight (the edge weighs users at each volume: "local weights"). All flows' rates
     * rise together, each by its weight (rate = weight x level), until a flow meets its own limit or a
     * resource it uses is full; those flows freeze at their rates and the rest go on rising. A flow's own
     * limit: its threads there times a thread's limit (its client's speed; one core's worth of bytes:
     * a thread runs on one core at most; and, with a time outside the volume per packet, what it moves
     * with the volume to itself at one packet in flight, 1 / (1/volume + 1/net)); an interactive user's limit is its demand, the rate it moved
     * under WEIGHTS, spread evenly over its volumes (its files go to them in turn). The resources: each
     * volume (its speed with all its bulk threads in flight, as NONE keeps them: an interactive thread
     * is idle most of the time and deepens the disk's queue only while it moves), the cores (each byte costs
     * cpuPerByte core-seconds), the link. So a user held by its client, its threads or a slow volume
     * leaves what it cannot use to the others in proportion to their weights. Keyed by user, and by
     * user@volume for its flow there.
     */
    static Map<String, Double> shares(Scenario s, Map<String, Double> interactiveBps) {
        List<FlowAt> flows = new ArrayList<>();
        int[] threadsAt = new int[s.volumes.size()];
        double perThread = s.cpuPerByte > 0 ? 1 / s.cpuPerByte : Double.POSITIVE_INFINITY;
        for (UserSpec u : s.users) {
            if (u.kind.bulk) {
                int[] count = new int[s.volumes.size()];
                for (int v : u.volumes) {
                    count[v]++;
                    threadsAt[v]++;
                }
                for (int v = 0; v < count.length; v++) {
                    if (count[v] > 0) {
                        double thread;
                        if (u.kind.direction == Direction.READ && s.readAheadBytes > 0) {
                            // read ahead: the volume reads while the thread sends, at the slower of the net and the client
                            thread = Math.min(perThread, Math.min(s.netBps, u.clientBps));
                        } else if (u.kind.direction == Direction.READ && !s.readSlotCoversSend) {
                            // read, then send at the slower of the net and the client, one after the other
                            thread = Math.min(perThread, 1 / (1 / s.volumes.get(v).bps + 1 / Math.min(s.netBps, u.clientBps)));
                        } else {
                            double serial = 1 / (1 / s.volumes.get(v).bps + 1 / s.netBps);
                            thread = Math.min(u.clientBps, Math.min(perThread, serial));
                        }
                        flows.add(new FlowAt(u.name, v, u.weight, count[v] * thread));
                    }
                }
            } else {
                for (int v : u.volumes) {
                    flows.add(new FlowAt(u.name, v, u.weight, interactiveBps.getOrDefault(u.name, 0.0) / u.volumes.length));
                }
            }
        }
        double[] volumeBps = new double[s.volumes.size()];
        for (int v = 0; v < volumeBps.length; v++) {
            VolumeSpec spec = s.volumes.get(v);
            volumeBps[v] = spec.bps * spec.gain().applyAsDouble(Math.max(1, threadsAt[v]));
        }
        int n = flows.size();
        double[] rate = new double[n];
        boolean[] frozen = new boolean[n];
        int open = n;
        while (open > 0) {
            // The least level at which something binds: a flow's limit, a volume, the cores, the link.
            double level = Double.POSITIVE_INFINITY;
            for (int i = 0; i < n; i++) {
                if (!frozen[i]) {
                    level = Math.min(level, flows.get(i).limit / flows.get(i).weight);
                }
            }
            for (int v = 0; v < volumeBps.length; v++) {
                level = Math.min(level, fullAt(flows, rate, frozen, volumeBps[v], v, 1));
            }
            if (s.cpuPerByte > 0) {
                level = Math.min(level, fullAt(flows, rate, frozen, CORES, -1, s.cpuPerByte));
            }
            if (s.linkBps < Double.POSITIVE_INFINITY) {
                level = Math.min(level, fullAt(flows, rate, frozen, s.linkBps, -1, 1));
            }
            for (int i = 0; i < n; i++) {
                if (!frozen[i]) {
                    rate[i] = Math.min(flows.get(i).limit, flows.get(i).weight * level);
                }
            }
            // Freeze the flows that met their limit or use a resource now full.
            double[] used = new double[volumeBps.length];
            double all = 0;
            for (int i = 0; i < n; i++) {
                used[flows.get(i).volume] += rate[i];
                all += rate[i];
            }
            boolean cpuFull = s.cpuPerByte > 0 && all * s.cpuPerByte >= CORES * (1 - 1e-9);
            boolean linkFull = all >= s.linkBps * (1 - 1e-9);
            int before = open;
            for (int i = 0; i < n; i++) {
                FlowAt f = flows.get(i);
                if (!frozen[i] && (rate[i] >= f.limit * (1 - 1e-9) || used[f.volume] >= volumeBps[f.volume] * (1 - 1e-9)
                        || cpuFull || linkFull)) {
                    frozen[i] = true;
                    open--;
                }
            }
            if (open == before) {
                throw new IllegalStateException("water-filling froze nothing at level " + level);
            }
        }
        Map<String, Double> out = new LinkedHashMap<>();
        for (int i = 0; i < n; i++) {
            out.merge(flows.get(i).user, rate[i], Double::sum);
            out.merge(flows.get(i).user + "@" + flows.get(i).volume, rate[i], Double::sum);
        }
        return out;
    }

    /**
     * The level at which a resource of CAPACITY is full: the flows at VOLUME use it (-1: every flow), each
     * byte costing COST of it; frozen flows hold their rates, the others rise by their weights.
     */
    private static double fullAt(List<FlowAt> flows, double[] rate, boolean[] frozen, double capacity, int volume,
                                 double cost) {
        double fixed = 0;
        double rising = 0;
        for (int i = 0; i < flows.size(); i++) {
            if (volume >= 0 && flows.get(i).volume != volume) {
                continue;
            }
            if (frozen[i]) {
                fixed += rate[i] * cost;
            } else {
                rising += flows.get(i).weight * cost;
            }
        }
        return rising > 0 ? Math.max(0, (capacity - fixed) / rising) : Double.POSITIVE_INFINITY;
        }

    // ---- one scenario's figures

    /**
     * One scenario's figures. INTERACTIVE: per interactive user {p50 W/S, p99 W/S, p50 W, p50 S, p99 W,
     * p99 S (ms), load (its rate under STATIC over its weighted share were it backlogged), cap/share (its
     * static cap over its weighted share at its least generous volume)}; BACKLOGGED: per bulk user {rate under WEIGHTS, its share, their ratio}; NODE_BPS: the
     * node's throughput under NONE, STATIC, WEIGHTS; ALONE: the first bulk user alone, WEIGHTS over NONE;
     * MEAN_DEPTH: the deepest volume's depth under WEIGHTS, averaged over the window's intervals.
     */
    record Figures(Scenario scenario, Map<String, double[]> interactive, Map<String, double[]> backlogged,
                   double[] nodeBps, String aloneUser, double alone, double meanDepth) {
        double node() {
            return nodeBps[2] / nodeBps[0];
        }

        double worst(int column) {
            return interactive.values().stream().mapToDouble(f -> f[column]).max().orElse(Double.NaN);
        }

        /** The worst p50 or p99 ratio of the interactive users whose load is at most 1 (NaN: none). */
        double worstWithinShare() {
            return worstWhereAtMostOne(6);
        }

        /**
         * The worst p50 or p99 ratio of the interactive users whose static cap is at most their weighted
         * share (cap/share <= 1): there static caps promise no more than the weights do, so the edge
         * should serve them as fast. Above 1 static caps give a user more than its weight (the bulk users'
         * caps leave the disk idle for it), and the weights win (docs/edge.md, section 5).
         */
        double worstCapWithinShare() {
            return worstWhereAtMostOne(7);
        }

        /** The worst p50 or p99 ratio of the interactive users whose figure at INDEX is at most 1. */
        private double worstWhereAtMostOne(int index) {
            return interactive.values().stream().filter(f -> f[index] <= 1).mapToDouble(f -> Math.max(f[0], f[1]))
                    .max().orElse(Double.NaN);
        }

        /** The bulk users' ratio farthest from 1. */
        double farthest() {
            double out = Double.NaN;
            for (double[] b : backlogged.values()) {
                if (Double.isNaN(out) || Math.abs(Math.log(b[2])) > Math.abs(Math.log(out))) {
                    out = b[2];
                }
            }
            return out;
        }

        String line() {
            StringBuilder out = new StringBuilder(String.format(Locale.ROOT, "seed %3d %-3s", scenario.seed, scenario.profile));
            interactive.forEach((u, f) -> out.append(String.format(Locale.ROOT,
                    " | %s p50 %.2f (%.0f/%.0f ms) p99 %.2f (%.0f/%.0f) load %.2f cap/share %.2f", u, f[0], f[2], f[3],
                    f[1], f[4], f[5], f[6], f[7])));
            backlogged.forEach((u, b) -> out.append(String.format(Locale.ROOT, " | %s %.2f of share (%.1f/%.1f)",
                    u, b[2], b[0] / MB, b[1] / MB)));
            out.append(String.format(Locale.ROOT, " | node %.3f (N/S/W %.0f/%.0f/%.0f MB/s) | alone %s %.3f | depth %.1f",
                    node(), nodeBps[0] / MB, nodeBps[1] / MB, nodeBps[2] / MB, aloneUser, alone, meanDepth));
            out.append(String.format(Locale.ROOT, "%n         %s: ", scenario.describe()));
            for (UserSpec u : scenario.users) {
                out.append(u.describe()).append("; ");
            }
            return out.toString().stripTrailing();
        }
    }

    static Figures evaluate(Scenario s, long windowNs) {
        Run none = run(s, SimulatedNode.Sharing.NONE, s.users, windowNs);
        Run fixed = run(s, SimulatedNode.Sharing.STATIC, s.users, windowNs);
        Run weights = run(s, SimulatedNode.Sharing.WEIGHTS, s.users, windowNs);
        Map<String, double[]> interactive = new LinkedHashMap<>();
        Map<String, Double> demand = new LinkedHashMap<>();
        for (UserSpec u : s.users) {
            if (u.kind.bulk) {
                continue;
            }
            demand.put(u.name, weights.rate.get(u.name));
            List<Double> w = weights.transferMs.get(u.name);
            List<Double> f = fixed.transferMs.get(u.name);
            if (w != null && f != null) {
                double w50 = percentile(w, 0.5);
                double w99 = percentile(w, 0.99);
                double f50 = percentile(f, 0.5);
                double f99 = percentile(f, 0.99);
                interactive.put(u.name, new double[] {w50 / f50, w99 / f99, w50, f50, w99, f99});
            }
        }
        Map<String, Double> share = shares(s, demand);
        // An interactive user's load: what it moved under STATIC over its share were it backlogged. Above 1 it
        // asks more than its weight gives it, and no weighted scheduler can also serve it as static caps did.
        for (Map.Entry<String, double[]> e : interactive.entrySet()) {
            Map<String, Double> backloggedHere = new LinkedHashMap<>(demand);
            backloggedHere.put(e.getKey(), Double.POSITIVE_INFINITY);
            Map<String, Double> fairs = shares(s, backloggedHere);
            double fair = fairs.get(e.getKey());
            double[] f = Arrays.copyOf(e.getValue(), 8);
            f[6] = fixed.rate.get(e.getKey()) / fair;
            // What static caps give it (a node-wide cap of the configured capacity) over its weighted share
            // at its least generous volume: above 1, static caps serve its transfers faster than its weight.
            UserSpec u = s.users.stream().filter(x -> x.name.equals(e.getKey())).findFirst().orElseThrow();
            double cap = s.configuredBps * u.weight / s.users.stream().mapToDouble(UserSpec::weight).sum();
            double least = Double.POSITIVE_INFINITY;
            for (int v : u.volumes) {
                least = Math.min(least, fairs.get(u.name + "@" + v));
            }
            f[7] = cap / least;
            e.setValue(f);
        }
        Map<String, double[]> backlogged = new LinkedHashMap<>();
        UserSpec first = null;
        for (UserSpec u : s.users) {
            if (u.kind.bulk) {
                double got = weights.rate.get(u.name);
                backlogged.put(u.name, new double[] {got, share.get(u.name), got / share.get(u.name)});
                first = first == null ? u : first;
            }
        }
        double aloneW = run(s, SimulatedNode.Sharing.WEIGHTS, List.of(first), ALONE_NS).totalBps;
        double aloneN = run(s, SimulatedNode.Sharing.NONE, List.of(first), ALONE_NS).totalBps;
        return new Figures(s, interactive, backlogged, new double[] {none.totalBps, fixed.totalBps, weights.totalBps},
                first.name, aloneW / aloneN, weights.meanDepth);
    }

    /** The nearest-rank percentile Q of SORTED. */
    static double percentile(List<Double> sorted, double q) {
        int rank = (int) Math.ceil(q * sorted.size());
        return sorted.get(Math.max(0, Math.min(sorted.size() - 1, rank - 1)));
    }

    // ---- over the seeds

    /** One figure's values over the scenarios, each with the scenario it came from. */
    private static final class Distribution {
        final String name;
        final boolean lowIsWorst;
        final List<double[]> values = new ArrayList<>();   // {value, seed}

        Distribution(String name, boolean lowIsWorst) {
            this.name = name;
            this.lowIsWorst = lowIsWorst;
        }

        void add(double value, long seed) {
            if (!Double.isNaN(value)) {
                values.add(new double[] {value, seed});
            }
        }

        String line() {
            if (values.isEmpty()) {
                return String.format(Locale.ROOT, "%-34s (none)", name);
            }
            List<Double> v = new ArrayList<>();
            values.forEach(x -> v.add(x[0]));
            Collections.sort(v);
            double[] worst = values.get(0);
            for (double[] x : values) {
                if (lowIsWorst ? x[0] < worst[0] : x[0] > worst[0]) {
                    worst = x;
                }
            }
            return String.format(Locale.ROOT, "%-34s %4d  %6.3f %6.3f %6.3f %6.3f %6.3f   seed %d", name, v.size(),
                    v.get(0), percentile(v, 0.1), percentile(v, 0.5), percentile(v, 0.9), v.get(v.size() - 1),
                    (long) worst[1]);
        }
    }

    /** Scenarios meeting each of issue 58's targets, over one profile or all. */
    private static final class Targets {
        int scenarios;
        int interactiveScenarios;
        int within12;
        int within15;
        int withinShareScenarios;
        int withinShare12;
        int capWithinScenarios;
        int capWithin12;
        int capWithin15;
        int bulkWithin10;
        int nodeAt95;
        int aloneAt95;

        void add(Figures f) {
            scenarios++;
            if (!f.interactive.isEmpty()) {
                interactiveScenarios++;
                double worst = Math.max(f.worst(0), f.worst(1));
                within12 += worst <= 1.2 ? 1 : 0;
                within15 += worst <= 1.5 ? 1 : 0;
            }
            double withinShare = f.worstWithinShare();
            if (!Double.isNaN(withinShare)) {
                withinShareScenarios++;
                withinShare12 += withinShare <= 1.2 ? 1 : 0;
            }
            double capWithin = f.worstCapWithinShare();
            if (!Double.isNaN(capWithin)) {
                capWithinScenarios++;
                capWithin12 += capWithin <= 1.2 ? 1 : 0;
                capWithin15 += capWithin <= 1.5 ? 1 : 0;
            }
            bulkWithin10 += f.backlogged.values().stream().allMatch(b -> Math.abs(b[2] - 1) <= 0.1) ? 1 : 0;
            nodeAt95 += f.node() >= 0.95 ? 1 : 0;
            aloneAt95 += f.alone >= 0.95 ? 1 : 0;
        }

        String line(String name) {
            return String.format(Locale.ROOT, "%-8s %9d | %5d/%-3d %5d/%-3d %5d/%-3d | %5d/%-3d %5d/%-3d | %9d/%-3d | %6d/%-3d | %6d/%-3d",
                    name, scenarios, within12, interactiveScenarios, within15, interactiveScenarios, withinShare12,
                    withinShareScenarios, capWithin12, capWithinScenarios, capWithin15, capWithinScenarios,
                    bulkWithin10, scenarios,
                    nodeAt95, scenarios, aloneAt95, scenarios);
        }
    }

    static void summarize(List<Figures> all) {
        Distribution p50 = new Distribution("interactive p50, WEIGHTS/STATIC", false);
        Distribution p99 = new Distribution("interactive p99, WEIGHTS/STATIC", false);
        Distribution p50in = new Distribution("  of those with load<=1: p50", false);
        Distribution p99in = new Distribution("  of those with load<=1: p99", false);
        Distribution low = new Distribution("backlogged rate/share, worst low", true);
        Distribution high = new Distribution("backlogged rate/share, worst high", false);
        Distribution node = new Distribution("node throughput, WEIGHTS/NONE", true);
        Distribution alone = new Distribution("a user alone, WEIGHTS/NONE", true);
        Map<String, Targets> byProfile = new TreeMap<>();
        Targets total = new Targets();
        for (Figures f : all) {
            long seed = f.scenario.seed;
            f.interactive.values().forEach(x -> {
                p50.add(x[0], seed);
                p99.add(x[1], seed);
                if (x[6] <= 1) {
                    p50in.add(x[0], seed);
                    p99in.add(x[1], seed);
                }
            });
            f.backlogged.values().forEach(b -> {
                low.add(b[2], seed);
                high.add(b[2], seed);
            });
            node.add(f.node(), seed);
            alone.add(f.alone, seed);
            byProfile.computeIfAbsent(f.scenario.profile, k -> new Targets()).add(f);
            total.add(f);
        }
        System.out.println();
        System.out.println("distribution over " + all.size() + " scenarios (one value per interactive user, per backlogged user, per scenario)");
        System.out.printf(Locale.ROOT, "%-34s %4s  %6s %6s %6s %6s %6s   %s%n", "figure", "n", "min", "p10", "median", "p90", "max", "worst");
        for (Distribution d : List.of(p50, p99, p50in, p99in, low, high, node, alone)) {
            System.out.println(d.line());
        }
        System.out.println();
        System.out.println("scenarios meeting issue 58's targets: interactive p50 and p99 within 1.2x / 1.5x of static (of those with an");
        System.out.println("interactive user), every backlogged user within 10 % of its share, node >= 95 % of none, alone >= 95 % of none");
        System.out.println("(load<=1: only the interactive users whose load is at most 1, those a weighted scheduler can serve so;");
        System.out.println(" cap<=share: only those whose static cap is at most their weighted share, where static promises no more)");
        System.out.printf(Locale.ROOT, "%-8s %9s | %9s %9s %9s | %9s %9s | %13s | %10s | %10s%n", "profile", "scenarios", "<=1.2x",
                "<=1.5x", "load<=1 1.2x", "cap<=share 1.2x", "1.5x", "bulk +-10 %", "node>=95%", "alone>=95%");
        byProfile.forEach((name, t) -> System.out.println(t.line(name)));
        System.out.println(total.line("all"));
    }

    // ---- a trace

    /** Prints one line per 100 ms interval between FROM and TO (ns of simulated time since the start). */
    private static final class Trace {
        final long fromNs;
        final long toNs;
        Map<String, Long> before = Map.of();
        final Map<String, Integer> transfersSeen = new LinkedHashMap<>();

        Trace(long fromNs, long toNs) {
            this.fromNs = fromNs;
            this.toNs = toNs;
        }

        void interval(Model m) {
            long t = m.node.now() - SECOND;   // SimulatedNode starts its clock at 1 s
            Map<String, Long> moved = m.moved();
            StringBuilder out = new StringBuilder(String.format(Locale.ROOT, "t %7.1f", t / 1e9));
            for (Dispatcher d : m.node.throttles.dispatchers()) {
                out.append(String.format(Locale.ROOT, " | %s depth %d flight %d wait %d %.0f MB/s", d.volume,
                        d.depth(), d.inFlight(), d.waiting(), d.movedBps() / MB));
            }
            m.workers.forEach((user, ws) -> {
                long flying = ws.stream().filter(w -> w.inFlight).count();
                long waiting = ws.stream().filter(w -> w.waiting || w.sleeping).count();
                double bps = (moved.get(user) - before.getOrDefault(user, 0L)) / (DepthLoop.PERIOD_NS / 1e9);
                out.append(String.format(Locale.ROOT, " | %s %.1f f%d w%d", user, bps / MB, flying, waiting));
                int seen = transfersSeen.getOrDefault(user, 0);
                List<long[]> done = new ArrayList<>();
                ws.forEach(w -> done.addAll(w.transfers));
                for (long[] tr : done.subList(Math.min(seen, done.size()), done.size())) {
                    out.append(String.format(Locale.ROOT, " done %.0f ms", (tr[1] - tr[0]) / 1e6));
                }
                transfersSeen.put(user, done.size());
            });
            if (t >= fromNs && t <= toNs) {
                System.out.println(out);
            }
            before = moved;
        }
    }

    static void trace(Scenario s, SimulatedNode.Sharing sharing, long windowNs, long fromNs, long toNs) {
        System.out.println("trace of seed " + s.seed + " under " + sharing + ": " + s.describe());
        for (UserSpec u : s.users) {
            System.out.println("  " + u.describe());
        }
        System.out.println("per volume: depth, packets in flight, waiting, moved over the last interval; per user: MB/s "
                + "over the interval, threads in flight (f) and waiting (w), transfers done");
        Model m = new Model(s, sharing, s.users);
        Trace trace = new Trace(fromNs, toNs);
        measure(m, WARM_UP_NS + windowNs, trace);
    }

    // ---- main

    private static boolean onOff(String value, String option) {
        if (!"on".equals(value) && !"off".equals(value)) {
            throw new IllegalArgumentException(option + " " + value + ": not on or off");
        }
        return "on".equals(value);
    }

    public static void main(String[] args) {
        List<Long> seeds = new ArrayList<>();
        String profile = null;
        long windowNs = 60 * SECOND;
        Long traced = null;
        SimulatedNode.Sharing policy = SimulatedNode.Sharing.WEIGHTS;
        double from = 0;
        double to = Double.POSITIVE_INFINITY;
        boolean net = true;
        boolean readSlotCoversSend = true;
        long readAheadBytes = DATANODE_READ_AHEAD;
        SimulatedNode.ReadAhead readAhead = SimulatedNode.ReadAhead.DISPATCHED;
        long readAheadPiece = 0;   // a slice of the volume (Dispatcher.pieceBytes)
        boolean packetSlots = true;
        boolean shortCircuit = true;
        try {
            for (int i = 0; i < args.length; i++) {
                String value = i + 1 < args.length ? args[i + 1] : null;
                switch (args[i]) {
                    case "--seeds" -> seeds.addAll(seeds(value));
                    case "--profile" -> profile = profile(value);
                    case "--seconds" -> windowNs = (long) (positive(value, "--seconds") * SECOND);
                    case "--trace" -> traced = Long.parseLong(value);
                    case "--policy" -> policy = SimulatedNode.Sharing.valueOf(value);
                    case "--from" -> from = Double.parseDouble(value);
                    case "--to" -> to = Double.parseDouble(value);
                    case "--net" -> net = onOff(value, "--net");
                    case "--read-slot" -> readSlotCoversSend = readSlot(value);
                    case "--read-ahead-kib" -> readAheadBytes = (long) (nonNegative(value, "--read-ahead-kib") * 1024);
                    case "--read-ahead" -> readAhead = readAhead(value);
                    case "--read-ahead-piece-kib" -> readAheadPiece = (long) (nonNegative(value, "--read-ahead-piece-kib") * 1024);
                    case "--packet-slots" -> packetSlots = onOff(value, "--packet-slots");
                    case "--short-circuit" -> shortCircuit = onOff(value, "--short-circuit");
                    default -> throw new IllegalArgumentException("unknown argument " + args[i]
                            + " (allowed: --seeds, --profile, --seconds, --net, --read-slot, --read-ahead-kib, --read-ahead, "
                            + "--read-ahead-piece-kib, --packet-slots, --short-circuit, --trace, --policy, --from, --to)");
                }
                i++;
            }
            if (traced == null && seeds.isEmpty()) {
                throw new IllegalArgumentException("--seeds (such as 0-99) or --trace SEED is required");
            }
        } catch (IllegalArgumentException | NullPointerException e) {
            System.err.println("EdgeScenarios: " + (e.getMessage() != null ? e.getMessage() : "an argument lacks its value"));
            System.exit(2);
            return;
        }
        if (traced != null) {
            trace(draw(traced, profile, net, readSlotCoversSend, readAheadBytes, readAhead, readAheadPiece, packetSlots), policy, windowNs, (long) (from * SECOND),
                    Double.isInfinite(to) ? Long.MAX_VALUE : (long) (to * SECOND));
            return;
        }
        System.out.printf(Locale.ROOT, "model: %.0f s warm-up, then %.0f s measured per policy (NONE, STATIC, WEIGHTS, same draw); "
                + "alone: %.0f s; threads' time outside the volume per packet (net): %s; a read's slot covers: %s; "
                + "the DataNode's read-ahead: %d KiB, %s; a dispatched read's packets: %s%n",
                WARM_UP_NS / 1e9, windowNs / 1e9, ALONE_NS / 1e9, net ? "on, 150-1000 MB/s log-uniform" : "off",
                readSlotCoversSend ? "its read and send (transferTo)" : "its read only (a copy; the send and the client outside)",
                readAheadBytes / 1024, describe(readAhead, readAheadPiece),
                packetSlots ? "their copy and send in slots of the volume's packets' dispatcher, pieces the disk reads faster "
                        + "than those go out with no slot (read58c; --packet-slots on)"
                        : "no slot, every piece a disk slot (ra58b; --packet-slots off)");
        System.out.println("per scenario: each interactive user's p50 and p99 WEIGHTS/STATIC (WEIGHTS/STATIC ms), each backlogged "
                + "user's rate over its weighted max-min share (MB/s got/share), node WEIGHTS/NONE, the first bulk user alone WEIGHTS/NONE, "
                + "the mean depth under WEIGHTS");
        List<Figures> all = new ArrayList<>();
        for (long seed : seeds) {
            Figures f = evaluate(draw(seed, profile, net, readSlotCoversSend, readAheadBytes, readAhead, readAheadPiece, packetSlots), windowNs);
            System.out.println(f.line());
            System.out.flush();
            all.add(f);
        }
        if (shortCircuit) {
            System.out.println(shortCircuitLine(packetSlots));
        }
        summarize(all);
    }

    /** The short-circuit test's two users' names and weights (tests/e2e/test_hdfs_short_circuit.py: priorities 4 and 8). */
    static final String[] SHORT_CIRCUIT_USERS = {"alice", "bob"};
    static final double[] SHORT_CIRCUIT_WEIGHTS = {4, 8};

    /**
     * tests/e2e/test_hdfs_short_circuit.py's case (short-circuit refused: both read through the DataNode), the
     * one branch ra58b broke on real HDFS: two local readers at 4 and 8, one thread each, re-reading their
     * 64 MiB files from the page cache (the first round reads them from a 60 MB/s disk), their clients on the
     * node's two cores. Each byte costs the DataNode's thread and its client 1 / (870 MB/s) core-seconds each
     * (the testbed moved ~870 MB/s through one DataNode with both on two cores), so the cores bind, and one
     * reader alone (a core for its thread, one for its client) takes them all. Returns each user's bytes/s over SECONDS after a 5 s warm-up.
     */
    static Map<String, Double> shortCircuit(SimulatedNode.Sharing sharing, boolean packetSlots, double seconds) {
        double coreBps = 870 * MB;
        SimulatedNode node = new SimulatedNode(sharing, CORES);
        node.readAhead(DATANODE_READ_AHEAD, SimulatedNode.ReadAhead.DISPATCHED, 0);
        node.packetSlots(packetSlots);
        node.pageCache(1024 * MIB);
        node.configured(40 * MB);   // the test's NODE_BW (static caps only)
        SimulatedNode.Volume disk = node.volume("v0", 60 * MB);
        for (int u = 0; u < SHORT_CIRCUIT_USERS.length; u++) {
            node.weight(SHORT_CIRCUIT_USERS[u], SHORT_CIRCUIT_WEIGHTS[u]);
            SimulatedNode.Worker w = new SimulatedNode.Worker(SHORT_CIRCUIT_USERS[u], Direction.READ, disk,
                    Double.POSITIVE_INFINITY, 64 * MIB, 0, node.now());
            w.files = 1;
            w.cpuPerByte = 1 / coreBps;
            w.clientCpuPerByte = 1 / coreBps;
            node.add(w);
        }
        node.runFor(WARM_UP_NS);
        return node.rates(seconds);
    }

    /** The short-circuit case under NONE and WEIGHTS (main's and ra58b's), one line. */
    static String shortCircuitLine(boolean packetSlots) {
        StringBuilder out = new StringBuilder("short-circuit case (tests/e2e/test_hdfs_short_circuit.py: readers at 4 : 8 "
                + "re-reading cached files, the cores bind), MB/s " + String.join(" : ", SHORT_CIRCUIT_USERS) + ":");
        String[][] runs = {{"NONE", "none"}, {"WEIGHTS", packetSlots ? "weights" : "weights (ra58b)"}};
        for (String[] run : runs) {
            Map<String, Double> r = shortCircuit(SimulatedNode.Sharing.valueOf(run[0]), packetSlots, 10);
            double a = r.get(SHORT_CIRCUIT_USERS[0]);
            double b = r.get(SHORT_CIRCUIT_USERS[1]);
            out.append(String.format(Locale.ROOT, " %s %.0f : %.0f (1 : %.2f);", run[1], a / MB, b / MB, b / a));
        }
        if (packetSlots) {
            Map<String, Double> r = shortCircuit(SimulatedNode.Sharing.WEIGHTS, false, 10);
            double a = r.get(SHORT_CIRCUIT_USERS[0]);
            double b = r.get(SHORT_CIRCUIT_USERS[1]);
            out.append(String.format(Locale.ROOT, " ra58b's (--packet-slots off) %.0f : %.0f (1 : %.2f)", a / MB, b / MB, b / a));
        }
        return out.toString();
    }

    private static List<Long> seeds(String spec) {
        List<Long> out = new ArrayList<>();
        for (String part : spec.split(",")) {
            String[] range = part.split("-");
            try {
                long a = Long.parseLong(range[0].trim());
                long b = range.length > 1 ? Long.parseLong(range[1].trim()) : a;
                if (range.length > 2 || b < a || a < 0) {
                    throw new NumberFormatException();
                }
                for (long s = a; s <= b; s++) {
                    out.add(s);
                }
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("--seeds " + spec + ": not N, N-M (N <= M, N >= 0) or a comma-separated list of those");
            }
        }
        return out;
    }

    private static double nonNegative(String v, String name) {
        double d = Double.parseDouble(v);
        if (!(d >= 0) || Double.isInfinite(d)) {
            throw new IllegalArgumentException(name + " " + v + ": must be >= 0");
        }
        return d;
    }

    private static SimulatedNode.ReadAhead readAhead(String v) {
        for (SimulatedNode.ReadAhead r : SimulatedNode.ReadAhead.values()) {
            if (r.name().toLowerCase(Locale.ROOT).equals(v)) {
                return r;
            }
        }
        throw new IllegalArgumentException("--read-ahead " + v + ": not window, requests or dispatched");
    }

    private static String describe(SimulatedNode.ReadAhead r, long piece) {
        return switch (r) {
            case WINDOW -> "a window kept full, unordered (window)";
            case REQUESTS -> "Hadoop's requests, unordered (requests)";
            case DISPATCHED -> "Hadoop's requests through the dispatcher, "
                    + (piece > 0 ? "in pieces of " + piece / 1024 + " KiB" : "in pieces of a slice of the volume")
                    + ", up to " + ReadAhead.IN_FLIGHT + " an op in flight (dispatched)";
        };
    }

    private static boolean readSlot(String v) {
        if ("read+send".equals(v)) {
            return true;
        }
        if ("read".equals(v)) {
            return false;
        }
        throw new IllegalArgumentException("--read-slot " + v + ": not read or read+send");
    }

    private static String profile(String p) {
        if (p == null || !List.of("a", "b", "c", "d", "e").contains(p)) {
            throw new IllegalArgumentException("--profile " + p + ": not one of a, b, c, d, e");
        }
        return p;
    }

    private static double positive(String v, String name) {
        double d = Double.parseDouble(v);
        if (!(d > 0)) {
            throw new IllegalArgumentException(name + " " + v + ": must be > 0");
        }
        return d;
    }
}
