package org.vnodesync.datanode;

import net.bytebuddy.asm.Advice;
import org.apache.hadoop.hdfs.util.DataTransferThrottler;

/** Inlined into BlockSender.sendBlock(out, baseStream, throttler): reads throttled per user. */
final class SendAdvice {
    private SendAdvice() {
    }

    @Advice.OnMethodEnter(suppress = Throwable.class)
    static void enter(@Advice.Argument(value = 2, readOnly = false) DataTransferThrottler throttler) {
        throttler = Registry.forRead(throttler);
    }
}
