package org.vnodesync.datanode;

import java.util.concurrent.atomic.LongAdder;
import org.apache.hadoop.hdfs.util.Canceler;
import org.apache.hadoop.hdfs.util.DataTransferThrottler;

/**
 * One user's token bucket for one direction on this DataNode, shared by all the user's transfers.
 * Counts the bytes it passed and the time transfers spent waiting in it; rate 0 counts only.
 */
final class UserThrottler extends DataTransferThrottler {
    private volatile long rate;
    final LongAdder bytes = new LongAdder();
    final LongAdder waitNanos = new LongAdder();
    final LongAdder ops = new LongAdder();

    UserThrottler(long rate) {
        super(Math.max(rate, 1));
        this.rate = rate;
    }

    void setRate(long newRate) {
        if (newRate > 0 && newRate != rate) {
            setBandwidth(newRate);
        }
        rate = newRate;
    }

    @Override
    public void throttle(long numOfBytes) {
        throttle(numOfBytes, null);
    }

    @Override
    public void throttle(long numOfBytes, Canceler canceler) {
        bytes.add(numOfBytes);
        if (rate <= 0) {
            return;
        }
        long started = System.nanoTime();
        super.throttle(numOfBytes, canceler);
        waitNanos.add(System.nanoTime() - started);
    }

    /** This op's throttler: the user's bucket, then the node-wide one HDFS configured (if any). */
    DataTransferThrottler forOp(DataTransferThrottler nodeWide) {
        ops.increment();
        if (nodeWide == null) {
            return this;
        }
        UserThrottler user = this;
        return new DataTransferThrottler(Long.MAX_VALUE / 2) {
            @Override
            public void throttle(long numOfBytes) {
                throttle(numOfBytes, null);
            }

            @Override
            public void throttle(long numOfBytes, Canceler canceler) {
                user.throttle(numOfBytes, canceler);
                nodeWide.throttle(numOfBytes, canceler);
            }
        };
    }
}
