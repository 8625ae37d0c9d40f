package org.vnodesync.dnthrottle;

import static net.bytebuddy.matcher.ElementMatchers.named;
import static net.bytebuddy.matcher.ElementMatchers.takesArgument;

import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.nio.file.Path;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;
import net.bytebuddy.agent.builder.AgentBuilder;
import net.bytebuddy.asm.Advice;
import net.bytebuddy.description.type.TypeDescription;
import net.bytebuddy.dynamic.DynamicType;
import net.bytebuddy.utility.JavaModule;

/** -javaagent entry point: per-user throttlers for a DataNode's block reads and writes. */
public final class Agent {
    private static final String DATANODE = "org.apache.hadoop.hdfs.server.datanode.";
    // Matched by the argument the advice reads, so a changed signature is left alone instead of misread.
    private static final String TOKEN = "org.apache.hadoop.security.token.Token";
    private static final String THROTTLER = "org.apache.hadoop.hdfs.util.DataTransferThrottler";

    private Agent() {
    }

    public static void premain(String arguments, Instrumentation instrumentation) {
        try {
            start(arguments, instrumentation);
        } catch (Throwable e) {
            // The DataNode must start anyway; it then runs with Hadoop's own throttling only.
            AgentLog.once("premain", "vnode-sync datanode throttle agent failed to start", e);
        }
    }

    private static void start(String arguments, Instrumentation instrumentation) throws Exception {
        AgentArgs args = AgentArgs.parse(arguments);
        args.errors().forEach(error -> AgentLog.warn("vnode-sync throttle agent: " + error));
        Throttles throttles = new Throttles(new Policy.Rates(args.defaultReadBps(), args.defaultWriteBps()),
                System.currentTimeMillis());
        Hooks.install(throttles, new Identity(new SocketOwners(Path.of("/proc/self/net"))));
        if (args.socket() != null) {
            new ControlServer(args.socket(), throttles).start();
        }
        AgentLog.info("vnode-sync throttle agent: per-user rates are unknown until the storage agent sends them"
                + " on " + args.socket() + "; everyone gets the default rates (read " + args.defaultReadBps()
                + " B/s, write " + args.defaultWriteBps() + " B/s, 0 = unlimited)");
        Failures listener = new Failures(instrumentation);
        ClassFileTransformer transformer = new AgentBuilder.Default()
                .disableClassFormatChanges()
                .with(listener)
                .type(named(DATANODE + "DataXceiver"))
                .transform((builder, type, loader, module, domain) -> builder
                        .visit(Advice.to(Advices.ReadBlock.class).on(named("readBlock").and(takesArgument(1, named(TOKEN)))))
                        .visit(Advice.to(Advices.WriteBlock.class).on(named("writeBlock").and(takesArgument(2, named(TOKEN))))))
                .type(named(DATANODE + "BlockSender"))
                .transform((builder, type, loader, module, domain) -> builder
                        .visit(Advice.to(Advices.SendBlock.class).on(named("sendBlock").and(takesArgument(2, named(THROTTLER))))))
                .type(named(DATANODE + "BlockReceiver"))
                .transform((builder, type, loader, module, domain) -> builder
                        .visit(Advice.to(Advices.ReceiveBlock.class).on(named("receiveBlock").and(takesArgument(4, named(THROTTLER))))))
                .installOn(instrumentation);
        listener.installed(transformer);
    }

    /**
     * Logs a failed or successful weaving of the three DataNode classes (each once). Once all three are
     * woven the transformer is removed: woven classes stay woven, and no later class load of the DataNode
     * pays for Byte Buddy reading its class file.
     */
    private static final class Failures extends AgentBuilder.Listener.Adapter {
        private static final int HOOKED_CLASSES = 3;
        private final Instrumentation instrumentation;
        private final Set<String> hooked = ConcurrentHashMap.newKeySet();
        private final AtomicReference<ClassFileTransformer> transformer = new AtomicReference<>();

        Failures(Instrumentation instrumentation) {
            this.instrumentation = instrumentation;
        }

        void installed(ClassFileTransformer installed) {
            transformer.set(installed);
            removeWhenDone();
        }

        @Override
        public void onTransformation(TypeDescription type, ClassLoader loader, JavaModule module, boolean loaded,
                                     DynamicType dynamicType) {
            AgentLog.info("vnode-sync throttle agent: hooked " + type.getName());
            hooked.add(type.getName());
            removeWhenDone();
        }

        private void removeWhenDone() {
            if (hooked.size() < HOOKED_CLASSES) {
                return;
            }
            ClassFileTransformer done = transformer.getAndSet(null);
            if (done != null && instrumentation.removeTransformer(done)) {
                AgentLog.info("vnode-sync throttle agent: all " + HOOKED_CLASSES + " classes hooked; transformer removed");
            }
        }

        @Override
        public void onError(String typeName, ClassLoader loader, JavaModule module, boolean loaded, Throwable error) {
            AgentLog.once("weave-" + typeName, "vnode-sync throttle agent could not hook " + typeName
                    + "; its ops use Hadoop's throttler only", error);
        }
    }
}
