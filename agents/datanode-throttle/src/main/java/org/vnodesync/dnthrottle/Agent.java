package org.vnodesync.dnthrottle;

import static net.bytebuddy.matcher.ElementMatchers.named;

import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;
import net.bytebuddy.agent.builder.AgentBuilder;
import net.bytebuddy.asm.Advice;
import net.bytebuddy.description.type.TypeDescription;
import net.bytebuddy.dynamic.DynamicType;
import net.bytebuddy.utility.JavaModule;

/** -javaagent entry point: per-user weighted scheduling of a DataNode's block reads and writes. */
public final class Agent {
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
        Throttles throttles = new Throttles(Policy.Shares.ceilings(args.defaultReadBps(), args.defaultWriteBps()),
                System.currentTimeMillis());
        Hooks.install(throttles, new Identity(sameHostOwners()));
        HookReport report = new HookReport();
        weave(instrumentation, args.skipped(), report);
        new DepthLoop(throttles).start();
        if (args.socket() != null) {
            new ControlServer(args.socket(), throttles,
                    new Protocol.Environment(report, Agent::hadoopVersion, Hooks.OP_THREADS, Agent::dataNodeSettings))
                    .start();
        }
        AgentLog.info("vnode-sync throttle agent: shares are unknown until the storage agent sends them on "
                + args.socket() + "; every op gets the default ceilings (read " + args.defaultReadBps()
                + " B/s, write " + args.defaultWriteBps() + " B/s, 0 = none); hooks: " + report.fields());
    }

    /** sock_diag by 4-tuple where JNA loads; else the /proc/net/tcp walk (also its fallback on an error). */
    private static OwnerLookup sameHostOwners() {
        SocketOwners walk = new SocketOwners(Paths.get("/proc/self/net"));
        Throwable why = SockDiag.unavailable();
        if (why != null) {
            AgentLog.warn("vnode-sync throttle agent: no sock_diag (" + why + "); same-host socket owners are"
                    + " found by walking /proc/net/tcp");
            return walk;
        }
        SockDiag diag = new SockDiag();
        return (client, server) -> {
            try {
                return diag.ownerOf(client, server);
            } catch (java.io.IOException | RuntimeException e) {
                AgentLog.once("sock-diag", "sock_diag lookup failed; walking /proc/net/tcp instead", e);
                return walk.ownerOf(client, server);
            }
        };
    }

    private static String hadoopVersion() {
        return org.apache.hadoop.util.VersionInfo.getVersion();
    }

    /** Read at the first handshake, as near the DataNode's own reading of its files as this agent gets. */
    private static final AtomicReference<Map<String, String>> DATANODE_SETTINGS = new AtomicReference<>();

    /**
     * What the storage agent checks of this DataNode and cannot see itself (docs/deploy-hdfs.md): the JVM
     * it runs on, and block tokens as its Configuration (hdfs-site.xml on its classpath) has them. The
     * NameNode's setting decides in the end (DataNode.registerBlockPoolWithSecretManager); it is not
     * visible here.
     */
    static Map<String, String> dataNodeSettings() {
        Map<String, String> settings = DATANODE_SETTINGS.get();
        if (settings == null) {
            settings = new LinkedHashMap<>();
            settings.put("java", System.getProperty("java.version"));
            settings.put("block_tokens", String.valueOf(new org.apache.hadoop.hdfs.HdfsConfiguration().getBoolean(
                    "dfs.block.access.token.enable", false)));
            DATANODE_SETTINGS.compareAndSet(null, Collections.unmodifiableMap(settings));
        }
        return DATANODE_SETTINGS.get();
    }

    /**
     * Weaves every hook not skipped into its class and loads those classes now (not initialized), so the
     * handshake says from the start which hooks hold instead of waiting for the first op to load them.
     */
    static void weave(Instrumentation instrumentation, Set<Hook> skipped, HookReport report) {
        Map<String, List<Hook>> byClass = new LinkedHashMap<>();
        for (Hook hook : Hook.values()) {
            report.set(hook.id(), skipped.contains(hook) ? HookReport.SKIPPED : HookReport.PENDING);
            if (!skipped.contains(hook)) {
                byClass.computeIfAbsent(hook.className(), c -> new ArrayList<>()).add(hook);
            }
        }
        Listener listener = new Listener(instrumentation, byClass, report);
        AgentBuilder builder = new AgentBuilder.Default().disableClassFormatChanges().with(listener);
        for (Map.Entry<String, List<Hook>> entry : byClass.entrySet()) {
            List<Hook> hooks = entry.getValue();
            builder = builder.type(named(entry.getKey())).transform((b, type, loader, module, domain) -> {
                DynamicType.Builder<?> out = b;
                for (Hook hook : hooks) {
                    if (type.getDeclaredMethods().filter(hook.matcher()).isEmpty()) {
                        report.set(hook.id(), HookReport.NOT_FOUND);
                        AgentLog.warn("vnode-sync throttle agent: no " + hook.describe().substring(2) + " in "
                                + type.getName() + " (another Hadoop?): hook " + hook.id() + " not woven");
                    } else {
                        out = out.visit(Advice.to(hook.advice).on(hook.matcher()));
                    }
                }
                return out;
            });
        }
        listener.installed(builder.installOn(instrumentation));
        for (String className : byClass.keySet()) {
            try {
                Class.forName(className, false, ClassLoader.getSystemClassLoader());
            } catch (Throwable e) {
                for (Hook hook : byClass.get(className)) {
                    report.set(hook.id(), HookReport.NOT_FOUND);
                }
                AgentLog.warn("vnode-sync throttle agent: no class " + className + " (" + e + "): its hooks are not woven");
            }
        }
        Hooks.orderReadAheads(HookReport.WOVEN.equals(report.state(Hook.READ_AHEAD_STREAM.id()))
                && HookReport.WOVEN.equals(report.state(Hook.READ_AHEAD_RUN.id())));
    }

    /**
     * Records each class's weaving (each once). Once every hooked class is done the transformer is
     * removed: woven classes stay woven, and no later class load of the DataNode pays for Byte Buddy.
     */
    private static final class Listener extends AgentBuilder.Listener.Adapter {
        private final Instrumentation instrumentation;
        private final Map<String, List<Hook>> byClass;
        private final HookReport report;
        private final Set<String> done = ConcurrentHashMap.newKeySet();
        private final AtomicReference<ClassFileTransformer> transformer = new AtomicReference<>();

        Listener(Instrumentation instrumentation, Map<String, List<Hook>> byClass, HookReport report) {
            this.instrumentation = instrumentation;
            this.byClass = byClass;
            this.report = report;
        }

        void installed(ClassFileTransformer installed) {
            transformer.set(installed);
            removeWhenDone();
        }

        @Override
        public void onTransformation(TypeDescription type, ClassLoader loader, JavaModule module, boolean loaded,
                                     DynamicType dynamicType) {
            for (Hook hook : byClass.getOrDefault(type.getName(), Collections.<Hook>emptyList())) {
                report.setIfPending(hook.id(), HookReport.WOVEN);
            }
            AgentLog.info("vnode-sync throttle agent: hooked " + type.getName());
        }

        @Override
        public void onComplete(String typeName, ClassLoader loader, JavaModule module, boolean loaded) {
            if (byClass.containsKey(typeName)) {
                done.add(typeName);
                removeWhenDone();
            }
        }

        @Override
        public void onError(String typeName, ClassLoader loader, JavaModule module, boolean loaded, Throwable error) {
            for (Hook hook : byClass.getOrDefault(typeName, Collections.<Hook>emptyList())) {
                report.set(hook.id(), HookReport.FAILED);
            }
            AgentLog.once("weave-" + typeName, "vnode-sync throttle agent could not hook " + typeName
                    + "; its ops use Hadoop's throttler only", error);
        }

        private void removeWhenDone() {
            if (!done.containsAll(byClass.keySet())) {
                return;
            }
            ClassFileTransformer finished = transformer.getAndSet(null);
            if (finished != null && instrumentation.removeTransformer(finished)) {
                AgentLog.info("vnode-sync throttle agent: every hooked class done; transformer removed");
            }
        }
    }
}
