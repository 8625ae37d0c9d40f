package org.vnodesync.dnthrottle;

import static net.bytebuddy.matcher.ElementMatchers.named;
import static net.bytebuddy.matcher.ElementMatchers.takesArgument;
import static net.bytebuddy.matcher.ElementMatchers.takesArguments;

import net.bytebuddy.description.method.MethodDescription;
import net.bytebuddy.matcher.ElementMatcher;

/**
 * The points of Hadoop's DataNode the agent weaves advice into. Each is matched by the argument its
 * advice reads, so a Hadoop whose signature differs is left unhooked (and reported) instead of misread.
 */
enum Hook {
    READ_BLOCK("DataXceiver", "readBlock", 1, Hook.TOKEN, Advices.ReadBlock.class),
    WRITE_BLOCK("DataXceiver", "writeBlock", 2, Hook.TOKEN, Advices.WriteBlock.class),
    SEND_BLOCK("BlockSender", "sendBlock", 2, Hook.THROTTLER, Advices.SendBlock.class),
    RECEIVE_BLOCK("BlockReceiver", "receiveBlock", 4, Hook.THROTTLER, Advices.ReceiveBlock.class),
    // DataNode-internal transfers (balancer, mover): charged to the system VNode.
    REPLACE_BLOCK("DataXceiver", "replaceBlock", 2, Hook.TOKEN, Advices.ReplaceBlock.class),
    COPY_BLOCK("DataXceiver", "copyBlock", 1, Hook.TOKEN, Advices.CopyBlock.class),
    // Short-circuit local reads: file descriptors only for users whose share cannot bind.
    SHORT_CIRCUIT_FDS("DataNode", "requestShortCircuitFdsForRead", 1, Hook.TOKEN, Advices.ShortCircuitFds.class),
    // A received packet's bytes into its block file: what a write costs the volume (docs/edge.md, §4).
    WRITE_DATA("fsdataset.ReplicaOutputStreams", "writeDataToDisk", 2, "int", Advices.WriteData.class),
    // A long read's read-ahead requests, made on its thread and read on the pool's: their disk reads take
    // the read's slots (ReadAhead; docs/edge.md, A4). Without both, the read's packets take them.
    READ_AHEAD_STREAM(Hook.IO, "ReadaheadPool", "readaheadStream", 5, Hook.IO + "ReadaheadPool$ReadaheadRequest",
            Advices.ReadAheadStream.class),
    READ_AHEAD_RUN(Hook.IO, "ReadaheadPool$ReadaheadRequestImpl", "run", -1, null, Advices.ReadAheadRun.class);

    static final String DATANODE = "org.apache.hadoop.hdfs.server.datanode.";
    private static final String IO = "org.apache.hadoop.io.";
    private static final String TOKEN = "org.apache.hadoop.security.token.Token";
    private static final String THROTTLER = "org.apache.hadoop.hdfs.util.DataTransferThrottler";

    private final String pkg;
    final String simpleClass;
    final String method;
    final int argument;          // -1: the method takes no arguments
    final String argumentType;
    final Class<?> advice;

    Hook(String simpleClass, String method, int argument, String argumentType, Class<?> advice) {
        this(DATANODE, simpleClass, method, argument, argumentType, advice);
    }

    Hook(String pkg, String simpleClass, String method, int argument, String argumentType, Class<?> advice) {
        this.pkg = pkg;
        this.simpleClass = simpleClass;
        this.method = method;
        this.argument = argument;
        this.argumentType = argumentType;
        this.advice = advice;
    }

    /** "BlockSender.sendBlock": how the handshake and the agent setting skip_hook name it (no package, no outer class). */
    String id() {
        return simpleClass.substring(Math.max(simpleClass.lastIndexOf('.'), simpleClass.lastIndexOf('$')) + 1) + "."
                + method;
    }

    String className() {
        return pkg + simpleClass;
    }

    ElementMatcher.Junction<MethodDescription> matcher() {
        return argument < 0 ? named(method).and(takesArguments(0))
                : named(method).and(takesArgument(argument, named(argumentType)));
    }

    /** "a readaheadStream with a ...ReadaheadRequest argument 5", "a run without arguments": what the matcher asks for. */
    String describe() {
        return argument < 0 ? "a " + method + " without arguments"
                : "a " + method + " with a " + argumentType + " argument " + argument;
    }

    static Hook byId(String id) {
        for (Hook hook : values()) {
            if (hook.id().equals(id)) {
                return hook;
            }
        }
        return null;
    }
}
