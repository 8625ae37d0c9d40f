package org.vnodesync.dnthrottle;

import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import org.apache.hadoop.hdfs.ExtendedBlockId;

/**
 * Decides whether a local client may read a block's files itself (short-circuit: the DataNode hands it
 * file descriptors and never sees the bytes). Granted only while the user's share cannot bind, so a
 * user that would be held reads through the DataNode, where the scheduler holds it:
 * <ul>
 *   <li>refused if the user has a read ceiling (a limit, or a static cap);</li>
 *   <li>refused while another user has a read op in progress here, or is backlogged in the read
 *       scheduler;</li>
 *   <li>refused while another user holds a recent grant: short-circuit bytes are invisible to the
 *       scheduler, so a grant counts as reading for as long as the block would take at the node's
 *       rate R (at least GRANT_FLOOR_NS).</li>
 * </ul>
 * A grant covers one block, but a client keeps its descriptors in a cache and reads the block again
 * without asking: so when another user's read starts here, the grants of everyone else are revoked
 * (their shared-memory slots marked invalid, as the DataNode does for a deleted block): each client
 * then asks again at its next block, is refused, and reads through the DataNode (Hadoop's client does
 * so for a refusal that names a block format version).
 */
final class ShortCircuitGate {
    static final long GRANT_FLOOR_NS = 1_000_000_000L;

    private final Map<String, Long> readingUntil = new ConcurrentHashMap<>();
    private final Map<String, AtomicInteger> readsInProgress = new ConcurrentHashMap<>();
    private final Map<String, Set<ExtendedBlockId>> granted = new ConcurrentHashMap<>();

    /** USER's read op through the DataNode starts: everyone else's grants are revoked by INVALIDATE. */
    void readStarted(String user, Consumer<ExtendedBlockId> invalidate) {
        readsInProgress.computeIfAbsent(user, u -> new AtomicInteger()).incrementAndGet();
        for (Map.Entry<String, Set<ExtendedBlockId>> grants : granted.entrySet()) {
            if (!grants.getKey().equals(user) && !grants.getValue().isEmpty()) {
                Set<ExtendedBlockId> blocks = grants.getValue();
                for (ExtendedBlockId block : blocks) {
                    blocks.remove(block);
                    invalidate.accept(block);
                }
                readingUntil.remove(grants.getKey());
            }
        }
    }

    void readEnded(String user) {
        AtomicInteger count = readsInProgress.get(user);
        if (count != null) {
            count.decrementAndGet();
        }
    }

    /** Null: granted (and booked); else why not, for the client's log. */
    String refusal(Throttles throttles, String user, ExtendedBlockId block, long blockBytes, long nowNs) {
        Throttles.Charge charge = throttles.chargeFor(user);
        Flow flow = charge.read();
        if (!flow.ceiling.unlimited()) {
            return "vnode-sync: " + charge.name() + " has a read ceiling on this DataNode; read through it";
        }
        for (Map.Entry<String, AtomicInteger> reading : readsInProgress.entrySet()) {
            if (!reading.getKey().equals(charge.name()) && reading.getValue().get() > 0) {
                return "vnode-sync: " + reading.getKey() + " reads through this DataNode; " + charge.name()
                        + " shares it";
            }
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
        if (block != null) {
            granted.computeIfAbsent(charge.name(), u -> ConcurrentHashMap.newKeySet()).add(block);
        }
        return null;
    }
}
