package org.vnodesync.dnthrottle;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import org.apache.hadoop.hdfs.ExtendedBlockId;

/**
 * Decides whether a local client may read a block's files itself (short-circuit: the DataNode hands it
 * file descriptors and never sees the bytes). Granted only while the user's share cannot bind, so a
 * user that would be held reads through the DataNode, where the scheduler holds it. Refused:
 * <ul>
 *   <li>if the user has a read ceiling (a limit, or a static cap);</li>
 *   <li>while another user reads through this DataNode (an op in progress, one ended less than
 *       LINGER_NS ago, or waiting or in flight at a volume's dispatcher);</li>
 *   <li>while another user holds a grant.</li>
 * </ul>
 * A client keeps a block's descriptors in a cache and reads the block again without asking, so grants
 * are short: each lasts as long as the block would take at what the busiest volume last moved, or at the configured capacity (at least GRANT_FLOOR_NS)
 * and is then revoked (its shared-memory slot marked invalid, as the DataNode does for a deleted
 * block), so the client asks again and the gate decides again; and when another user's read starts
 * here, everyone else's grants are revoked at once. A refusal makes Hadoop's client read that block
 * through the DataNode.
 */
final class ShortCircuitGate {
    static final long GRANT_FLOOR_NS = 1_000_000_000L;
    static final long LINGER_NS = 2_000_000_000L;

    /** user -> block -> until when the grant holds (ns). */
    private final Map<String, Map<ExtendedBlockId, Long>> granted = new ConcurrentHashMap<>();
    private final Map<String, AtomicInteger> readsInProgress = new ConcurrentHashMap<>();
    private final Map<String, Long> lastReadEnded = new ConcurrentHashMap<>();

    /** Null: granted (and booked); else why not, for the client's log. */
    String refusal(Throttles throttles, String user, ExtendedBlockId block, long blockBytes, long nowNs) {
        Throttles.Charge charge = throttles.chargeFor(user);
        String name = charge.name();
        if (!charge.read().ceiling.unlimited()) {
            return "vnode-sync: " + name + " has a read ceiling on this DataNode; read through it";
        }
        for (Map.Entry<String, AtomicInteger> reading : readsInProgress.entrySet()) {
            if (!reading.getKey().equals(name) && reading.getValue().get() > 0) {
                return "vnode-sync: " + reading.getKey() + " reads through this DataNode; " + name + " shares it";
            }
        }
        for (Map.Entry<String, Long> ended : lastReadEnded.entrySet()) {
            if (!ended.getKey().equals(name) && nowNs - ended.getValue() < LINGER_NS) {
                return "vnode-sync: " + ended.getKey() + " has just read through this DataNode; " + name
                        + " shares it";
            }
        }
        if (throttles.busyBesides(charge)) {
            return "vnode-sync: other users read through this DataNode; " + name + " shares it";
        }
        for (Map.Entry<String, Map<ExtendedBlockId, Long>> grants : granted.entrySet()) {
            if (!grants.getKey().equals(name) && !grants.getValue().isEmpty()) {
                return "vnode-sync: " + grants.getKey() + " reads short-circuit here; " + name + " shares it";
            }
        }
        // What a volume last moved, or (none moved yet) the capacity the node was configured with.
        double moved = throttles.busiestVolumeBps();
        double rate = moved > 0 ? moved : throttles.policy().node().readCapacity();
        long busyNs = rate > 0 ? (long) (1e9 * blockBytes / rate) : 0;
        if (block != null) {
            granted.computeIfAbsent(name, u -> new ConcurrentHashMap<>())
                    .put(block, nowNs + Math.max(GRANT_FLOOR_NS, busyNs));
        }
        return null;
    }

    /** USER's read op through the DataNode starts: everyone else's grants are revoked by INVALIDATE. */
    void readStarted(String user, Consumer<ExtendedBlockId> invalidate) {
        readsInProgress.computeIfAbsent(user, u -> new AtomicInteger()).incrementAndGet();
        granted.forEach((holder, blocks) -> {
            if (!holder.equals(user)) {
                revoke(blocks, Long.MAX_VALUE, invalidate);
            }
        });
    }

    void readEnded(String user, long nowNs) {
        AtomicInteger count = readsInProgress.get(user);
        if (count != null) {
            count.decrementAndGet();
        }
        lastReadEnded.put(user, nowNs);
    }

    /** Revokes every grant that ran out by NOW; true if any grant is left (the sweeper goes on). */
    boolean sweep(long nowNs, Consumer<ExtendedBlockId> invalidate) {
        boolean left = false;
        for (Map<ExtendedBlockId, Long> blocks : granted.values()) {
            revoke(blocks, nowNs, invalidate);
            left |= !blocks.isEmpty();
        }
        return left;
    }

    private static void revoke(Map<ExtendedBlockId, Long> blocks, long byNs, Consumer<ExtendedBlockId> invalidate) {
        for (Map.Entry<ExtendedBlockId, Long> grant : blocks.entrySet()) {
            if (byNs == Long.MAX_VALUE || grant.getValue() - byNs <= 0) {
                if (blocks.remove(grant.getKey(), grant.getValue())) {
                    invalidate.accept(grant.getKey());
                }
            }
        }
    }
}
