package org.vnodesync.dnthrottle;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * One connection of the control channel: requests in, replies out, one at a time (docs/datanode-throttle.md).
 * Protocol 2: a HELLO handshake names the protocol, the agent, Hadoop's version and every hook; lines
 * are KIND key=value..., and either side skips keys it does not know.
 */
final class Protocol {
    /** The product's version: the jar manifest's Implementation-Version (from the pom); "unknown" run from classes. */
    static final String VERSION = version(Protocol.class.getPackage());
    static final int MIN_PROTOCOL = 2;
    static final int MAX_PROTOCOL = 2;
    static final int MAX_LINE = 4096;
    static final int MAX_APPLY_LINES = 200_000;
    private static final String TOO_LONG = "\u0000too long";
    /** Turns the connection into a stream of op threads (OpThreads), for the storage agent's CPU cgroups. */
    static final String WATCH_THREADS = "WATCH threads";

    /** What the handshake says about the DataNode this agent runs in. */
    static final class Environment {
        private final HookReport hooks;
        private final Supplier<String> hadoopVersion;
        private final OpThreads opThreads;
        private final Supplier<Map<String, String>> settings;

        Environment(HookReport hooks, Supplier<String> hadoopVersion) {
            this(hooks, hadoopVersion, new OpThreads(), Collections::emptyMap);
        }

        /**
         * settings: what the storage agent checks of the DataNode it cannot see itself (its JVM, its
         * Configuration's block tokens), as HELLO keys; asked at each handshake.
         */
        Environment(HookReport hooks, Supplier<String> hadoopVersion, OpThreads opThreads,
                    Supplier<Map<String, String>> settings) {
            this.hooks = hooks;
            this.hadoopVersion = hadoopVersion;
            this.opThreads = opThreads;
            this.settings = settings;
        }

        OpThreads opThreads() {
            return opThreads;
        }

        HookReport hooks() {
            return hooks;
        }

        Supplier<String> hadoopVersion() {
            return hadoopVersion;
        }
    }

    private final Throttles throttles;
    private final Environment environment;

    static String version(Package ours) {
        String version = ours == null ? null : ours.getImplementationVersion();
        return version == null || version.isEmpty() ? "unknown" : version;
    }

    Protocol(Throttles throttles, Environment environment) {
        this.throttles = throttles;
        this.environment = environment;
    }

    void serve(InputStream in, OutputStream out) throws IOException {
        String line;
        while ((line = readLine(in)) != null) {
            if (line.equals(WATCH_THREADS)) {
                environment.opThreads().watch(out);  // the connection is the watcher's until it ends
                return;
            }
            String reply = handle(line, in);
            if (reply == null) {
                return;  // peer went away inside an APPLY: nothing applied
            }
            out.write(reply.getBytes(StandardCharsets.UTF_8));
            out.flush();
        }
    }

    /** The full reply (ending in an OK or ERR line) to one request; null if the input ended mid-request. */
    String handle(String line, InputStream in) throws IOException {
        if (line.equals("PING")) {
            return "OK vnode-sync-datanode-throttle " + VERSION + " started=" + throttles.startedMs() + "\n";
        }
        if (line.equals("HELLO") || line.startsWith("HELLO ")) {
            return hello(line);
        }
        if (line.equals("STATS")) {
            synchronized (throttles) {
                return node() + throttles.stats() + "OK generation=" + throttles.policy().generation() + "\n";
            }
        }
        if (line.equals("APPLY") || line.startsWith("APPLY ")) {
            return apply(line, in);
        }
        return "ERR unknown request '" + ApplyParser.printable(line) + "'\n";
    }

    private String hello(String line) {
        try {
            long asked = Fields.parse(line).number("protocol", MAX_PROTOCOL);
            if (asked < MIN_PROTOCOL || asked > MAX_PROTOCOL) {
                return "ERR protocol " + asked + " is not spoken here: this agent (" + VERSION + ") speaks "
                        + MIN_PROTOCOL + ".." + MAX_PROTOCOL + "\n";
            }
        } catch (ApplyParser.BadApply e) {
            return "ERR " + e.getMessage() + "\n";
        }
        String hadoop;
        try {
            hadoop = token(environment.hadoopVersion().get());
        } catch (Throwable e) {
            hadoop = "unknown";
        }
        StringBuilder settings = new StringBuilder();
        try {
            for (Map.Entry<String, String> setting : environment.settings.get().entrySet()) {
                settings.append(' ').append(token(setting.getKey())).append('=').append(token(setting.getValue()));
            }
        } catch (Throwable e) {
            // A key the storage agent does not get is one it reports it could not check.
            AgentLog.once("hello-settings", "vnode-sync throttle agent could not read the DataNode's settings", e);
        }
        String hooks = environment.hooks().fields();
        return "OK protocol=" + MAX_PROTOCOL + " min_protocol=" + MIN_PROTOCOL + " agent=vnode-sync-datanode-throttle"
                + " version=" + VERSION + " hadoop=" + hadoop + " started_ms=" + throttles.startedMs()
                + " scheduler=sfq-depth watch=threads" + settings + (hooks.isEmpty() ? "" : " " + hooks) + "\n";
    }

    /** One value of a key=value line: nothing that would end or split it. */
    private static String token(String value) {
        return value == null || value.isEmpty() ? "unknown" : value.replaceAll("[^A-Za-z0-9._+-]", "_");
    }

    /** The node as the last APPLY configured it (capacities: what static caps divide; the edge needs none). */
    private String node() {
        Policy.Node node = throttles.policy().node();
        return "NODE started_ms=" + throttles.startedMs() + " read_capacity_bps=" + node.readCapacity()
                + " write_capacity_bps=" + node.writeCapacity() + " volumes=" + throttles.volumes().size() + "\n";
    }

    private String apply(String header, InputStream in) throws IOException {
        // Read up to END whatever happens, so a bad line never desynchronises the conversation.
        String error = null;
        long generation = 0;
        try {
            generation = ApplyParser.generation(header);
        } catch (ApplyParser.BadApply e) {
            error = e.getMessage() + " (this agent speaks protocol " + MIN_PROTOCOL + ".." + MAX_PROTOCOL
                    + ": APPLY generation=<n>)";
        }
        List<String> body = new ArrayList<>();
        String line;
        while (true) {
            line = readLine(in);
            if (line == null) {
                return null;
            }
            if (line.equals("END")) {
                break;
            }
            if (error != null) {
                continue;
            }
            if (line.equals(TOO_LONG)) {
                error = "line " + (body.size() + 1) + " longer than " + MAX_LINE + " bytes";
            } else if (body.size() >= MAX_APPLY_LINES) {
                error = "more than " + MAX_APPLY_LINES + " lines";
            } else {
                body.add(line);
            }
        }
        if (error != null) {
            return "ERR " + error + "; nothing changed\n";
        }
        try {
            ApplyParser.Parsed parsed = ApplyParser.parse(generation, body, throttles.startDefaults());
            Policy next = parsed.policy();
            throttles.apply(next);
            AgentLog.info("shares applied: generation " + generation + ", capacity read " + next.node().readCapacity()
                    + " write " + next.node().writeCapacity() + " B/s, " + next.users().size() + " users, "
                    + next.uids().size() + " uids, " + next.connections().size() + " connections"
                    + (parsed.skipped() > 0 ? ", " + parsed.skipped() + " lines of kinds this agent does not know" : ""));
            return "OK generation=" + generation + "\n";
        } catch (ApplyParser.BadApply e) {
            return "ERR " + e.getMessage() + "; nothing changed\n";
        }
    }

    /** A "\n"-terminated UTF-8 line without the terminator; TOO_LONG past MAX_LINE bytes; null at EOF. */
    static String readLine(InputStream in) throws IOException {
        ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        boolean tooLong = false;
        int b;
        while ((b = in.read()) != -1) {
            if (b == '\n') {
                return tooLong ? TOO_LONG : new String(buffer.toByteArray(), StandardCharsets.UTF_8);
            }
            if (buffer.size() < MAX_LINE) {
                buffer.write(b);
            } else {
                tooLong = true;
            }
        }
        return null;
    }
}
