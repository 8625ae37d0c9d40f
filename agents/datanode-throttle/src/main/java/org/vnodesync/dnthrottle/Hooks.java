package org.vnodesync.dnthrottle;

import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.FileDescriptor;
import java.io.IOException;
import java.util.concurrent.ThreadPoolExecutor;
import org.apache.hadoop.hdfs.ExtendedBlockId;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.security.token.block.BlockTokenIdentifier;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.hdfs.server.datanode.fsdataset.FsVolumeSpi;
import org.apache.hadoop.hdfs.util.DataTransferThrottler;
import org.apache.hadoop.security.token.Token;

/**
 * What the advice woven into DataXceiver, BlockSender, BlockReceiver and ReadaheadPool calls. Public because the advice
 * runs inside Hadoop's classes. Never throws: on any error the op keeps Hadoop's own throttler.
 */
public final class Hooks {
    /** The VNode of DataNode-internal traffic (re-replication, decommissioning, balancer, EC reconstruction). */
    static final String SYSTEM = "system";

    private static final ThreadLocal<Throttles.Charge> CURRENT = new ThreadLocal<>();
    /** The receiving op's throttler, for its writes into the block file (WRITE_DATA). */
    private static final ThreadLocal<UserThrottler> RECEIVING = new ThreadLocal<>();
    /** The sending op's throttler, for its read-ahead requests (ReadaheadPool.readaheadStream, on its thread). */
    private static final ThreadLocal<UserThrottler> SENDING = new ThreadLocal<>();
    /** Whether both read-ahead hooks are woven: only then do a read's read-ahead requests take its slots (ReadAhead). */
    private static volatile boolean orderReadAheads;
    private static volatile Throttles throttles;
    private static volatile Identity identity;
    private static final ShortCircuitGate SHORT_CIRCUIT = new ShortCircuitGate();
    /** Which thread serves which user's op, for the storage agent's CPU cgroups (WATCH threads). */
    static final OpThreads OP_THREADS = new OpThreads();
    /** The user of this thread's read op through the DataNode, for the short-circuit gate. */
    private static final ThreadLocal<String> READING = new ThreadLocal<>();
    /** The DataNode, seen at its first short-circuit request: its registry revokes grants. */
    private static volatile Object dataNode;
    private static final long SWEEP_MS = 100;
    private static final java.util.concurrent.atomic.AtomicReference<Thread> SWEEPER =
            new java.util.concurrent.atomic.AtomicReference<>();

    private Hooks() {
    }

    static void install(Throttles t, Identity i) {
        throttles = t;
        identity = i;
    }

    /** At the start of readBlock / writeBlock: decide the user and remember it for this op's thread. */
    public static void opStart(Token<?> token, String remoteAddress, String localAddress, boolean write) {
        opEnd();
        Throttles t = throttles;
        if (t == null) {
            return;
        }
        try {
            String user = identity.resolve(t.policy(), tokenUser(token), remoteAddress, localAddress);
            Throttles.Charge charge = t.chargeFor(user);
            charge.counters().addOp(write ? Direction.WRITE : Direction.READ);
            CURRENT.set(charge);
            OP_THREADS.started(charge.name());
            if (!write) {
                readStarted(charge.name());
            }
        } catch (Throwable e) {
            AgentLog.once("identity", "could not decide an op's user; it runs as DEFAULT", e);
            try {
                Throttles.Charge charge = t.chargeFor(null);
                charge.counters().addOp(write ? Direction.WRITE : Direction.READ);
                CURRENT.set(charge);
                OP_THREADS.started(charge.name());
            } catch (Throwable ignored) {
                // nothing more to do: the op keeps Hadoop's throttler
            }
        }
    }

    /** readBlock / writeBlock: an empty client name means a DataNode asked (re-replication, EC reconstruction). */
    public static void opStart(Token<?> token, String clientName, String remoteAddress, String localAddress,
                               boolean write) {
        if (clientName != null && clientName.isEmpty()) {
            systemOpStart(write);
        } else {
            opStart(token, remoteAddress, localAddress, write);
        }
    }

    /** An op no client started: charged to the system VNode if the storage agent named one, else left alone. */
    public static void systemOpStart(boolean write) {
        opEnd();
        try {
            Throttles.Charge charge = systemCharge(throttles);
            if (charge != null) {
                charge.counters().addOp(write ? Direction.WRITE : Direction.READ);
                CURRENT.set(charge);
                OP_THREADS.started(charge.name());
                if (!write) {
                    readStarted(charge.name());
                }
            }
        } catch (Throwable e) {
            AgentLog.once("system-op", "could not charge an internal transfer to the system VNode", e);
        }
    }

    private static Throttles.Charge systemCharge(Throttles t) {
        return t != null && t.policy().users().containsKey(SYSTEM) ? t.chargeFor(SYSTEM) : null;
    }

    private static void readStarted(String user) {
        READING.set(user);
        SHORT_CIRCUIT.readStarted(user, Hooks::invalidate);
    }

    /** Marks the block's short-circuit slots invalid: its readers' clients ask for it again. */
    private static void invalidate(ExtendedBlockId block) {
        Object node = dataNode;
        if (node instanceof DataNode) {
            ((DataNode) node).getShortCircuitRegistry().processBlockInvalidation(block);
        }
    }

    /** Revokes grants as they run out, every SWEEP_MS from the DataNode's first short-circuit request on. */
    private static void startSweeper() {
        if (SWEEPER.get() == null && SWEEPER.compareAndSet(null, new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(SWEEP_MS);
                    SHORT_CIRCUIT.sweep(System.nanoTime(), Hooks::invalidate);
                } catch (InterruptedException e) {
                    return;
                } catch (Throwable e) {
                    AgentLog.once("short-circuit-sweep", "could not revoke a short-circuit grant", e);
                }
            }
        }, "vnode-sync short-circuit sweeper"))) {
            Thread sweeper = SWEEPER.get();
            sweeper.setDaemon(true);
            sweeper.start();
        }
    }

    /** requestShortCircuitFdsForRead: null to hand out the block's files, else why not (ShortCircuitGate). */
    public static String shortCircuitRefusal(Object node, Token<?> token, ExtendedBlock block) {
        Throttles t = throttles;
        if (t == null) {
            return null;
        }
        try {
            dataNode = node;
            startSweeper();
            return SHORT_CIRCUIT.refusal(t, tokenUser(token), ExtendedBlockId.fromExtendedBlock(block),
                    block.getNumBytes(), System.nanoTime());
        } catch (Throwable e) {
            AgentLog.once("short-circuit", "could not decide a short-circuit request; it is refused", e);
            return "vnode-sync: could not decide; read through the DataNode";
        }
    }

    /** What a refused requestShortCircuitFdsForRead throws: the client reads that block through the DataNode. */
    public static Throwable shortCircuitRefused(String why) {
        return new DataNode.ShortCircuitFdsVersionException(why);
    }

    public static void opEnd() {
        if (CURRENT.get() != null) {
            CURRENT.remove();
            try {
                OP_THREADS.ended();
            } catch (Throwable e) {
                AgentLog.once("op-threads", "could not tell an op's end to the storage agent", e);
            }
        }
        String reading = READING.get();
        if (reading != null) {
            READING.remove();
            SHORT_CIRCUIT.readEnded(reading, System.nanoTime());
        }
    }

    /** BlockSender.sendBlock's throttler argument for this op, whose BLOCK the DATANODE (Object: see Advices) serves. */
    public static DataTransferThrottler forSend(DataTransferThrottler original, ExtendedBlock block, Object datanode) {
        return forOp(original, Direction.READ, block, datanode);
    }

    /** BlockReceiver.receiveBlock's throttler argument for this op. */
    public static DataTransferThrottler forReceive(DataTransferThrottler original, ExtendedBlock block,
                                                   Object datanode) {
        return forOp(original, Direction.WRITE, block, datanode);
    }

    private static DataTransferThrottler forOp(DataTransferThrottler original, Direction direction,
                                               ExtendedBlock block, Object datanode) {
        try {
            Throttles.Charge charge = CURRENT.get();
            Throttles t = throttles;
            if (charge == null) {
                charge = systemCharge(t);  // no op started it: re-replication, decommissioning (DataTransfer)
            }
            if (charge == null || t == null || original instanceof UserThrottler) {
                return original;  // internal, and no system VNode: Hadoop's own throttler
            }
            UserThrottler throttler = new UserThrottler(t, charge, direction, volumeOf(block, datanode), original,
                    UserThrottler.SYSTEM_CLOCK, UserThrottler.SYSTEM_SLEEPER);
            if (direction == Direction.WRITE) {
                RECEIVING.set(throttler);
            } else {
                SENDING.set(throttler);
            }
            return throttler;
        } catch (Throwable e) {
            AgentLog.once("throttler-" + direction, "could not make a per-user throttler; Hadoop's is used", e);
            return original;
        }
    }

    /** The storage ID of the volume that holds BLOCK; the whole node where it cannot be known. */
    static String volumeOf(ExtendedBlock block, Object datanode) {
        if (block == null || !(datanode instanceof DataNode)) {
            return Throttles.WHOLE_NODE;
        }
        try {
            FsVolumeSpi volume = ((DataNode) datanode).getFSDataset().getVolume(block);
            return volume != null && volume.getStorageID() != null ? volume.getStorageID() : Throttles.WHOLE_NODE;
        } catch (RuntimeException e) {
            AgentLog.once("volume", "could not find a block's volume; its ops share the node's dispatcher", e);
            return Throttles.WHOLE_NODE;
        }
    }

    /** After sendBlock / receiveBlock: the transfer sends no more packets. */
    public static void transferEnd(DataTransferThrottler throttler) {
        RECEIVING.remove();
        SENDING.remove();
        try {
            if (throttler instanceof UserThrottler) {
                ((UserThrottler) throttler).close();
            }
        } catch (Throwable e) {
            AgentLog.once("transfer-end", "could not end a per-user transfer cleanly", e);
        }
    }

    /** ReplicaOutputStreams.writeDataToDisk starts: the receiving op waits for its turn at the volume. */
    public static void volumeWriteStart() {
        UserThrottler throttler = RECEIVING.get();
        if (throttler != null) {
            throttler.enterVolume();
        }
    }

    /** ...and has written LENGTH bytes: its slot is free. */
    public static void volumeWriteEnd(int length) {
        UserThrottler throttler = RECEIVING.get();
        if (throttler != null) {
            throttler.leaveVolume(length);
        }
    }

    /** After weaving: whether ReadaheadPool.readaheadStream and ReadaheadRequestImpl.run are both woven. */
    static void orderReadAheads(boolean woven) {
        orderReadAheads = woven;
    }

    /**
     * ReadaheadPool.readaheadStream starts on a sending op's thread, at POSITION with the read-ahead's
     * LENGTH and its LAST request: a request it will submit is made known to the op's read-ahead. The pool
     * (a ThreadPoolExecutor: Object, see Advices) gets its most threads for good: an op's reader holds one
     * while its pieces wait, so that 16 ops, not 4, wait in the dispatcher rather than in the pool's queue.
     */
    public static void readAheadStarts(Object pool, FileDescriptor fd, long position, long length, Object last) {
        if (!orderReadAheads) {
            return;
        }
        try {
            UserThrottler throttler = SENDING.get();
            if (throttler == null) {
                return;
            }
            if (pool instanceof ThreadPoolExecutor) {
                ThreadPoolExecutor executor = (ThreadPoolExecutor) pool;
                if (executor.getCorePoolSize() < executor.getMaximumPoolSize()) {
                    executor.setCorePoolSize(executor.getMaximumPoolSize());
                }
            }
            throttler.readAhead().beforeStream(fd, position, length, last);
        } catch (Throwable e) {
            AgentLog.once("read-ahead-stream", "could not order a read-ahead request; it runs as Hadoop's", e);
        }
    }

    /** ...and returned, having SUBMITTED a new request or not: the packet at POSITION waits for its read-ahead. */
    public static void readAheadReturns(FileDescriptor fd, long position, boolean submitted) {
        UserThrottler throttler = SENDING.get();
        if (throttler == null) {
            return;
        }
        try {
            throttler.awaitReadAhead(fd, position, submitted);
        } catch (Throwable e) {
            AgentLog.once("read-ahead-wait", "could not wait for a packet's read-ahead; it reads on its own", e);
        }
    }

    /**
     * ReadaheadRequestImpl.run on a pool thread, for the request at OFFSET of FD: true if it was an op's,
     * read here a slot a piece or left to the op's reader (ReadAhead); false: Hadoop's own run goes on.
     */
    public static boolean readAheadRun(FileDescriptor fd, long offset, String identifier) {
        try {
            return ReadAhead.run(fd, offset, identifier);
        } catch (Throwable e) {
            AgentLog.once("read-ahead-run", "could not run a read-ahead through the dispatcher", e);
            return false;
        }
    }

    static String tokenUser(Token<?> token) throws IOException {
        if (token == null) {
            return null;
        }
        byte[] bytes = token.getIdentifier();
        if (bytes == null || bytes.length == 0) {
            return null;  // block access tokens are off
        }
        BlockTokenIdentifier id = new BlockTokenIdentifier();
        id.readFields(new DataInputStream(new ByteArrayInputStream(bytes)));
        return id.getUserId();
    }

    static Throttles.Charge current() {
        return CURRENT.get();
    }
}
