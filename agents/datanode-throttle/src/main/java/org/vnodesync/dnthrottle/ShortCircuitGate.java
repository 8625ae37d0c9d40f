package org.vnodesync.dnthrottle;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Decides whether a local client may read a block's files itself (short-circuit: the DataNode hands it
 * file descriptors and never sees the bytes). Granted only while the user's share cannot bind, so a
 * user that would be held reads through the DataNode, where the scheduler holds it:
 * <ul>
 *   <li>refused if the user has a read ceiling (a limit, or a static cap);</li>
 *   <li>refused while another user's reads are backlogged in this DataNode's read scheduler;</li>
 *   <li>refused while another user holds a recent grant: short-circuit bytes are invisible to the
 *       scheduler, so a grant counts as reading for as long as the block would take at the node's
 *       rate R (at least GRANT_FLOOR_NS).</li>
 * </ul>
 * A grant covers one block: a reader that becomes held is refused at its next block and falls back to
 * a read through the DataNode (Hadoop's client does so for a refusal that names a block format version).
 */
final class ShortCircuitGate {
    static final long GRANT_FLOOR_NS = 1_000_000_000L;

    private final Map<String, Long> readingUntil = new ConcurrentHashMap<>();

    /** Null: granted (and booked); else why not, for the client's log. */
    String refusal(Throttles throttles, String user, long blockBytes, long nowNs) {
        Throttles.Charge charge = throttles.chargeFor(user);
        Flow flow = charge.read();
        if (!flow.ceiling.unlimited()) {
            return "vnode-sync: " + charge.name() + " has a read ceiling on this DataNode; read through it";
        }
        WeightedScheduler reads = throttles.scheduler(Direction.READ);
        if (reads.backloggedBesides(flow)) {
            return "vnode-sync: other users read through this DataNode; " + charge.name() + " shares it";
        }
        for (Map.Entry<String, Long> grant : readingUntil.entrySet()) {
            if (!grant.getKey().equals(charge.name()) && grant.getValue() - nowNs > 0) {
                return "vnode-sync: " + grant.getKey() + " reads short-circuit here; " + charge.name() + " shares it";
            }
        }
        long rate = reads.rate();
        long busyNs = rate > 0 ? (long) (1e9 * blockBytes / rate) : 0;
        readingUntil.put(charge.name(), nowNs + Math.max(GRANT_FLOOR_NS, busyNs));
        return null;
    }
}
