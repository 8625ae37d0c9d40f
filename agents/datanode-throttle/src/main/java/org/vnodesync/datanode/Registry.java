package org.vnodesync.datanode;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.hadoop.hdfs.security.token.block.BlockTokenIdentifier;
import org.apache.hadoop.hdfs.util.DataTransferThrottler;
import org.apache.hadoop.security.token.Token;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Per-user throttlers, the rates the storage agent last applied, and each op's user (a thread-local).
 * Public where the advice calls it: advice code is inlined into Hadoop's classes.
 */
public final class Registry {
    static final String DEFAULT = "";
    private static final Logger LOG = LoggerFactory.getLogger(Registry.class);

    /** What the storage agent applied, replaced whole by each APPLY. */
    record Rates(long generation, long defaultRead, long defaultWrite, Map<String, long[]> users,
                 Map<Integer, String> uids, Map<String, String> connections) {
    }

    /** A user's two throttlers; kept (with their counters) when the user leaves the rates. */
    static final class Pair {
        final UserThrottler read;
        final UserThrottler write;

        Pair(long readRate, long writeRate) {
            read = new UserThrottler(readRate);
            write = new UserThrottler(writeRate);
        }
    }

    private static volatile Rates rates;
    private static final Map<String, Pair> PAIRS = new ConcurrentHashMap<>();
    private static final ThreadLocal<Pair> CURRENT = new ThreadLocal<>();
    private static final Map<String, Boolean> FAULTS_LOGGED = new ConcurrentHashMap<>();
    static final long STARTED = System.currentTimeMillis();

    private Registry() {
    }

    static void start(long defaultRead, long defaultWrite) {
        apply(new Rates(0, defaultRead, defaultWrite, Map.of(), Map.of(), Map.of()));
    }

    static Rates rates() {
        return rates;
    }

    static synchronized void apply(Rates next) {
        PAIRS.computeIfAbsent(DEFAULT, k -> new Pair(next.defaultRead(), next.defaultWrite()));
        PAIRS.get(DEFAULT).read.setRate(next.defaultRead());
        PAIRS.get(DEFAULT).write.setRate(next.defaultWrite());
        for (Map.Entry<String, long[]> user : next.users().entrySet()) {
            Pair pair = PAIRS.computeIfAbsent(user.getKey(), k -> new Pair(user.getValue()[0], user.getValue()[1]));
            pair.read.setRate(user.getValue()[0]);
            pair.write.setRate(user.getValue()[1]);
        }
        rates = next;
    }

    /** Decide the op's user: block token, else same-host socket owner, else a reported connection. */
    public static void beginOp(Object[] arguments, String remoteAddress) {
        String user = null;
        try {
            user = userOf(arguments, remoteAddress);
        } catch (Throwable e) {
            fault("identity", e);
        }
        Rates now = rates;
        CURRENT.set(user != null && now.users().containsKey(user) ? PAIRS.get(user) : PAIRS.get(DEFAULT));
    }

    public static void endOp() {
        CURRENT.remove();
    }

    public static DataTransferThrottler forRead(DataTransferThrottler nodeWide) {
        try {
            return current().read.forOp(nodeWide);
        } catch (Throwable e) {
            fault("read throttler", e);
            return nodeWide;
        }
    }

    public static DataTransferThrottler forWrite(DataTransferThrottler nodeWide) {
        try {
            return current().write.forOp(nodeWide);
        } catch (Throwable e) {
            fault("write throttler", e);
            return nodeWide;
        }
    }

    private static Pair current() {
        Pair pair = CURRENT.get();
        return pair != null ? pair : PAIRS.get(DEFAULT);  // an op we did not see begin (e.g. a new Hadoop op)
    }

    static String userOf(Object[] arguments, String remoteAddress) throws Exception {
        for (Object argument : arguments) {
            if (argument instanceof Token<?> token && token.getIdentifier().length > 0) {
                Object id = token.decodeIdentifier();
                if (id instanceof BlockTokenIdentifier block && block.getUserId() != null
                        && !block.getUserId().isEmpty()) {
                    return block.getUserId();
                }
            }
        }
        SocketOwners.Endpoint client = SocketOwners.Endpoint.parse(remoteAddress);
        if (client == null) {
            return null;
        }
        Rates now = rates;
        Integer uid = SocketOwners.uidOf(client);
        if (uid != null && now.uids().containsKey(uid)) {
            return now.uids().get(uid);
        }
        return now.connections().get(client.key());
    }

    /** STATS lines: STARTED, DEFAULT, then USER per user ever seen (counters since JVM start). */
    static List<String> stats() {
        List<String> lines = new ArrayList<>();
        lines.add("STARTED " + STARTED);
        Map<String, Pair> sorted = new TreeMap<>(PAIRS);
        for (Map.Entry<String, Pair> entry : sorted.entrySet()) {
            Pair p = entry.getValue();
            String counters = p.read.bytes.sum() + " " + p.write.bytes.sum() + " " + p.read.waitNanos.sum() + " "
                    + p.write.waitNanos.sum() + " " + p.read.ops.sum() + " " + p.write.ops.sum();
            lines.add(entry.getKey().equals(DEFAULT) ? "DEFAULT " + counters : "USER " + entry.getKey() + " " + counters);
        }
        return lines;
    }

    /** An error inside the agent never fails a transfer; each kind is logged once. */
    static void fault(String kind, Throwable error) {
        if (FAULTS_LOGGED.putIfAbsent(kind, Boolean.TRUE) == null) {
            LOG.warn("vnode-sync throttle: {} failed, the op uses the default throttler: {}", kind, error.toString());
        }
    }
}
