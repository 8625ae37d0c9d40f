package org.vnodesync.dnthrottle;

import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import org.apache.hadoop.hdfs.security.token.block.BlockTokenIdentifier;
import org.apache.hadoop.hdfs.util.DataTransferThrottler;
import org.apache.hadoop.security.token.Token;

/**
 * What the advice woven into DataXceiver, BlockSender and BlockReceiver calls. Public because the advice
 * runs inside Hadoop's classes. Never throws: on any error the op keeps Hadoop's own throttler.
 */
public final class Hooks {
    private static final ThreadLocal<Throttles.Charge> CURRENT = new ThreadLocal<>();
    private static volatile Throttles throttles;
    private static volatile Identity identity;

    private Hooks() {
    }

    static void install(Throttles t, Identity i) {
        throttles = t;
        identity = i;
    }

    /** At the start of readBlock / writeBlock: decide the user and remember it for this op's thread. */
    public static void opStart(Token<?> token, String remoteAddress, String localAddress, boolean write) {
        CURRENT.remove();
        Throttles t = throttles;
        if (t == null) {
            return;
        }
        try {
            String user = identity.resolve(t.policy(), tokenUser(token), remoteAddress, localAddress);
            Throttles.Charge charge = t.chargeFor(user);
            charge.counters().addOp(write ? Direction.WRITE : Direction.READ);
            CURRENT.set(charge);
        } catch (Throwable e) {
            AgentLog.once("identity", "could not decide an op's user; it runs as DEFAULT", e);
            try {
                Throttles.Charge charge = t.chargeFor(null);
                charge.counters().addOp(write ? Direction.WRITE : Direction.READ);
                CURRENT.set(charge);
            } catch (Throwable ignored) {
                // nothing more to do: the op keeps Hadoop's throttler
            }
        }
    }

    public static void opEnd() {
        CURRENT.remove();
    }

    /** BlockSender.sendBlock's throttler argument for this op. */
    public static DataTransferThrottler forSend(DataTransferThrottler original) {
        return forOp(original, Direction.READ);
    }

    /** BlockReceiver.receiveBlock's throttler argument for this op. */
    public static DataTransferThrottler forReceive(DataTransferThrottler original) {
        return forOp(original, Direction.WRITE);
    }

    private static DataTransferThrottler forOp(DataTransferThrottler original, Direction direction) {
        try {
            Throttles.Charge charge = CURRENT.get();
            Throttles t = throttles;
            if (charge == null || t == null || original instanceof UserThrottler) {
                return original;  // not a client op we saw start (re-replication, balancer): Hadoop's own
            }
            return new UserThrottler(charge, direction, t.scheduler(direction), original,
                    UserThrottler.SYSTEM_CLOCK, UserThrottler.SYSTEM_SLEEPER);
        } catch (Throwable e) {
            AgentLog.once("throttler-" + direction, "could not make a per-user throttler; Hadoop's is used", e);
            return original;
        }
    }

    /** After sendBlock / receiveBlock: the transfer sends no more packets. */
    public static void transferEnd(DataTransferThrottler throttler) {
        try {
            if (throttler instanceof UserThrottler user) {
                user.close();
            }
        } catch (Throwable e) {
            AgentLog.once("transfer-end", "could not end a per-user transfer cleanly", e);
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
