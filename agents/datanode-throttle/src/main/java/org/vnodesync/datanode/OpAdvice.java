package org.vnodesync.datanode;

import net.bytebuddy.asm.Advice;

/** Inlined into DataXceiver's op methods: the op's user is decided here, before any byte moves. */
final class OpAdvice {
    private OpAdvice() {
    }

    @Advice.OnMethodEnter(suppress = Throwable.class)
    static void enter(@Advice.AllArguments Object[] arguments,
                      @Advice.FieldValue("remoteAddress") String remoteAddress) {
        Registry.beginOp(arguments, remoteAddress);
    }

    @Advice.OnMethodExit(suppress = Throwable.class, onThrowable = Throwable.class)
    static void exit() {
        Registry.endOp();
    }
}
