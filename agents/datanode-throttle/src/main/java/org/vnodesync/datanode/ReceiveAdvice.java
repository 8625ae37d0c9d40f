package org.vnodesync.datanode;

import net.bytebuddy.asm.Advice;
import org.apache.hadoop.hdfs.util.DataTransferThrottler;

/** Inlined into BlockReceiver.receiveBlock(..., throttler, ...): writes throttled per user. */
final class ReceiveAdvice {
    private ReceiveAdvice() {
    }

    @Advice.OnMethodEnter(suppress = Throwable.class)
    static void enter(@Advice.Argument(value = 4, readOnly = false) DataTransferThrottler throttler) {
        throttler = Registry.forWrite(throttler);
    }
}
