package org.vnodesync.datanode;

import static net.bytebuddy.matcher.ElementMatchers.named;
import static net.bytebuddy.matcher.ElementMatchers.takesArguments;

import java.lang.instrument.Instrumentation;
import java.nio.file.Path;
import net.bytebuddy.agent.builder.AgentBuilder;
import net.bytebuddy.asm.Advice;
import net.bytebuddy.description.type.TypeDescription;
import net.bytebuddy.dynamic.DynamicType;
import net.bytebuddy.utility.JavaModule;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Loaded into the DataNode with {@code -javaagent:jar=socket=PATH[,default_read_bps=N][,default_write_bps=N]}.
 * Every DataXceiver op decides its user before the first byte; BlockSender.sendBlock and
 * BlockReceiver.receiveBlock then get that user's throttler (HDFS-17087's throttle points).
 */
public final class ThrottleAgent {
    static final String VERSION = "0.1.0";
    private static final Logger LOG = LoggerFactory.getLogger(ThrottleAgent.class);
    private static final String DATANODE = "org.apache.hadoop.hdfs.server.datanode.";

    private ThrottleAgent() {
    }

    public static void premain(String arguments, Instrumentation instrumentation) {
        AgentArguments settings;
        try {
            settings = AgentArguments.parse(arguments);
        } catch (IllegalArgumentException e) {
            LOG.error("vnode-sync throttle: {}; running with no default limits", e.getMessage());
            settings = AgentArguments.parse("");
        }
        Registry.start(settings.defaultReadBps, settings.defaultWriteBps);
        if (settings.socket == null) {
            LOG.error("vnode-sync throttle: no socket= argument; no per-user rates can arrive, everyone gets "
                    + "the default rates");
        } else {
            try {
                ControlChannel.start(Path.of(settings.socket));
                LOG.info("vnode-sync throttle: waiting for per-user rates on {}; until then everyone gets the "
                        + "default rates (read {} B/s, write {} B/s, 0 = unlimited)", settings.socket,
                        settings.defaultReadBps, settings.defaultWriteBps);
            } catch (Exception e) {
                LOG.error("vnode-sync throttle: cannot listen on {} ({}); everyone gets the default rates",
                        settings.socket, e.toString());
            }
        }
        new AgentBuilder.Default()
                .disableClassFormatChanges()
                .with(new FailureLog())
                .type(named(DATANODE + "DataXceiver"))
                .transform((builder, type, loader, module, domain) -> builder.visit(Advice.to(OpAdvice.class)
                        .on(named("readBlock").or(named("writeBlock")).or(named("transferBlock"))
                                .or(named("copyBlock")).or(named("replaceBlock")))))
                .type(named(DATANODE + "BlockSender"))
                .transform((builder, type, loader, module, domain) -> builder.visit(Advice.to(SendAdvice.class)
                        .on(named("sendBlock").and(takesArguments(3)))))
                .type(named(DATANODE + "BlockReceiver"))
                .transform((builder, type, loader, module, domain) -> builder.visit(Advice.to(ReceiveAdvice.class)
                        .on(named("receiveBlock").and(takesArguments(7)))))
                .installOn(instrumentation);
    }

    /** A class we could not rewrite is logged: the DataNode then runs unthrottled for it, never broken. */
    private static final class FailureLog extends AgentBuilder.Listener.Adapter {
        @Override
        public void onError(String typeName, ClassLoader loader, JavaModule module, boolean loaded, Throwable error) {
            LOG.error("vnode-sync throttle: cannot hook {}: {}", typeName, error.toString());
        }

        @Override
        public void onTransformation(TypeDescription type, ClassLoader loader, JavaModule module, boolean loaded,
                                     DynamicType dynamicType) {
            LOG.info("vnode-sync throttle: hooked {}", type.getName());
        }
    }
}
