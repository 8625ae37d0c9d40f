package org.vnodesync.dnthrottle;

import net.bytebuddy.asm.Advice;
import org.apache.hadoop.hdfs.util.DataTransferThrottler;
import org.apache.hadoop.security.token.Token;

/** Byte Buddy advice, inlined into Hadoop's methods; every piece suppresses its own errors. */
final class Advices {
    private Advices() {
    }

    /** DataXceiver.readBlock(block, token, ...). */
    static final class ReadBlock {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.Argument(1) Token<?> token,
                          @Advice.FieldValue("remoteAddress") String remote,
                          @Advice.FieldValue("localAddress") String local) {
            Hooks.opStart(token, remote, local, false);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit() {
            Hooks.opEnd();
        }
    }

    /** DataXceiver.writeBlock(block, storageType, token, ...). */
    static final class WriteBlock {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.Argument(2) Token<?> token,
                          @Advice.FieldValue("remoteAddress") String remote,
                          @Advice.FieldValue("localAddress") String local) {
            Hooks.opStart(token, remote, local, true);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit() {
            Hooks.opEnd();
        }
    }

    /** BlockSender.sendBlock(out, baseStream, throttler). */
    static final class SendBlock {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.Argument(value = 2, readOnly = false) DataTransferThrottler throttler) {
            throttler = Hooks.forSend(throttler);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.Argument(2) DataTransferThrottler throttler) {
            Hooks.transferEnd(throttler);
        }
    }

    /** BlockReceiver.receiveBlock(mirrOut, mirrIn, replyOut, mirrAddr, throttler, downstreams, isReplaceBlock). */
    static final class ReceiveBlock {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.Argument(value = 4, readOnly = false) DataTransferThrottler throttler) {
            throttler = Hooks.forReceive(throttler);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.Argument(4) DataTransferThrottler throttler) {
            Hooks.transferEnd(throttler);
        }
    }
}
