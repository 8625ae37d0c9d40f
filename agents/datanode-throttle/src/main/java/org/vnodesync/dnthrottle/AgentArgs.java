package org.vnodesync.dnthrottle;

import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;

/**
 * "-javaagent:<jar>=socket=<path>[,default_read_bps=N][,default_write_bps=N][,skip_hook=Class.method]...";
 * bad parts are reported, not fatal. skip_hook leaves one hook unwoven on purpose (to check that the
 * storage agent notices), and may be given more than once.
 */
final class AgentArgs {
    private final Path socket;
    private final long defaultReadBps;
    private final long defaultWriteBps;
    private final Set<Hook> skipped;
    private final List<String> errors;

    AgentArgs(Path socket, long defaultReadBps, long defaultWriteBps, Set<Hook> skipped, List<String> errors) {
        this.socket = socket;
        this.defaultReadBps = defaultReadBps;
        this.defaultWriteBps = defaultWriteBps;
        this.skipped = skipped;
        this.errors = errors;
    }

    Path socket() {
        return socket;
    }

    long defaultReadBps() {
        return defaultReadBps;
    }

    long defaultWriteBps() {
        return defaultWriteBps;
    }

    Set<Hook> skipped() {
        return skipped;
    }

    List<String> errors() {
        return errors;
    }

    static AgentArgs parse(String text) {
        Path socket = null;
        long read = 0;
        long write = 0;
        List<String> errors = new ArrayList<>();
        Set<Hook> skipped = EnumSet.noneOf(Hook.class);
        if (text != null && !text.isEmpty()) {
            for (String part : text.split(",", -1)) {
                int eq = part.indexOf('=');
                String key = eq < 0 ? part : part.substring(0, eq);
                String value = eq < 0 ? "" : part.substring(eq + 1);
                try {
                    switch (key) {
                        case "socket":
                            if (value.isEmpty() || !value.startsWith("/")) {
                                errors.add("socket must be an absolute path, got '" + ApplyParser.printable(value) + "'");
                            } else {
                                socket = Paths.get(value);
                            }
                            break;
                        case "default_read_bps":
                            read = ApplyParser.number("default_read_bps", value);
                            break;
                        case "default_write_bps":
                            write = ApplyParser.number("default_write_bps", value);
                            break;
                        case "skip_hook": {
                            Hook hook = Hook.byId(value);
                            if (hook == null) {
                                errors.add("skip_hook: no hook '" + ApplyParser.printable(value) + "'");
                            } else {
                                skipped.add(hook);
                            }
                            break;
                        }
                        default:
                            errors.add("unknown agent argument '" + ApplyParser.printable(key) + "'");
                    }
                } catch (ApplyParser.BadApply e) {
                    errors.add(e.getMessage());
                }
            }
        }
        if (socket == null) {
            errors.add("no socket=<path>: the storage agent cannot set per-user rates");
        }
        return new AgentArgs(socket, read, write, Collections.unmodifiableSet(skipped),
                Collections.unmodifiableList(errors));
    }
}
