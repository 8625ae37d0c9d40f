package org.vnodesync.dnthrottle;

import java.io.FileDescriptor;
import net.bytebuddy.asm.Advice;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.hdfs.util.DataTransferThrottler;
import org.apache.hadoop.security.token.Token;

/** Byte Buddy advice, inlined into Hadoop's methods; every piece suppresses its own errors. */
final class Advices {
    private Advices() {
    }

    /** DataXceiver.readBlock(block, token, clientName, ...); an empty client name: another DataNode's. */
    static final class ReadBlock {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.Argument(1) Token<?> token, @Advice.Argument(2) String clientName,
                          @Advice.FieldValue("remoteAddress") String remote,
                          @Advice.FieldValue("localAddress") String local) {
            Hooks.opStart(token, clientName, remote, local, false);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit() {
            Hooks.opEnd();
        }
    }

    /** DataXceiver.writeBlock(block, storageType, token, clientname, ...); empty clientname: a DataNode's. */
    static final class WriteBlock {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.Argument(2) Token<?> token, @Advice.Argument(3) String clientName,
                          @Advice.FieldValue("remoteAddress") String remote,
                          @Advice.FieldValue("localAddress") String local) {
            Hooks.opStart(token, clientName, remote, local, true);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit() {
            Hooks.opEnd();
        }
    }

    /** DataXceiver.replaceBlock(block, storageType, token, ...): a balancer or mover move, received here. */
    static final class ReplaceBlock {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter() {
            Hooks.systemOpStart(true);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit() {
            Hooks.opEnd();
        }
    }

    /** DataXceiver.copyBlock(block, token): a balancer or mover move, sent from here. */
    static final class CopyBlock {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter() {
            Hooks.systemOpStart(false);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit() {
            Hooks.opEnd();
        }
    }

    /**
     * DataNode.requestShortCircuitFdsForRead(block, token, maxVersion): skipped, and made to throw
     * ShortCircuitFdsVersionException, for a user whose share could bind. Hadoop answers that with
     * ERROR_UNSUPPORTED and a format version, which its client takes as "not for this block" and reads
     * the block through the DataNode (other errors would turn short-circuit off for the whole socket).
     */
    static final class ShortCircuitFds {
        @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class, suppress = Throwable.class)
        // The DataNode as Object: naming its class here would make Byte Buddy load it while it is being woven.
        static String enter(@Advice.This Object node, @Advice.Argument(0) ExtendedBlock block,
                            @Advice.Argument(1) Token<?> token) {
            return Hooks.shortCircuitRefusal(node, token, block);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.Enter String refusal, @Advice.Thrown(readOnly = false) Throwable thrown) {
            if (refusal != null) {
                thrown = Hooks.shortCircuitRefused(refusal);
            }
        }
    }

    /** BlockSender.sendBlock(out, baseStream, throttler); its block and DataNode name the volume. */
    static final class SendBlock {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.Argument(value = 2, readOnly = false) DataTransferThrottler throttler,
                          @Advice.FieldValue("block") ExtendedBlock block,
                          @Advice.FieldValue("datanode") Object datanode) {
            throttler = Hooks.forSend(throttler, block, datanode);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.Argument(2) DataTransferThrottler throttler) {
            Hooks.transferEnd(throttler);
        }
    }

    /**
     * ReplicaOutputStreams.writeDataToDisk(bytes, offset, length): a write's slot at its volume covers
     * this and nothing else, not the wait for the client's next packet nor the mirror to the pipeline.
     */
    static final class WriteData {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter() {
            Hooks.volumeWriteStart();
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.Argument(2) int length) {
            Hooks.volumeWriteEnd(length);
        }
    }

    /** BlockReceiver.receiveBlock(mirrOut, mirrIn, replyOut, mirrAddr, throttler, downstreams, isReplaceBlock). */
    static final class ReceiveBlock {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.Argument(value = 4, readOnly = false) DataTransferThrottler throttler,
                          @Advice.FieldValue("block") ExtendedBlock block,
                          @Advice.FieldValue("datanode") Object datanode) {
            throttler = Hooks.forReceive(throttler, block, datanode);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.Argument(4) DataTransferThrottler throttler) {
            Hooks.transferEnd(throttler);
        }
    }

    /**
     * ReadaheadPool.readaheadStream(identifier, fd, curPos, readaheadLength, maxOffsetToRead, lastReadahead),
     * on a sending op's thread before each packet of a long read (BlockSender.manageOsCache). The pool as
     * Object: its type is java.util.concurrent's, but the field's name is Hadoop's.
     */
    static final class ReadAheadStream {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.FieldValue("pool") Object pool, @Advice.Argument(1) FileDescriptor fd,
                          @Advice.Argument(2) long position, @Advice.Argument(3) long length,
                          @Advice.Argument(5) Object last) {
            Hooks.readAheadStarts(pool, fd, position, length, last);
        }

        @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
        static void exit(@Advice.Argument(1) FileDescriptor fd, @Advice.Argument(2) long position,
                         @Advice.Argument(5) Object last, @Advice.Return Object request) {
            Hooks.readAheadReturns(fd, position, request != null && request != last);
        }
    }

    /** ReadaheadPool$ReadaheadRequestImpl.run(), on a pool thread: skipped where the agent read the request itself. */
    static final class ReadAheadRun {
        @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class, suppress = Throwable.class)
        static boolean enter(@Advice.FieldValue("fd") FileDescriptor fd, @Advice.FieldValue("off") long offset,
                             @Advice.FieldValue("identifier") String identifier) {
            return Hooks.readAheadRun(fd, offset, identifier);
        }
    }
}
