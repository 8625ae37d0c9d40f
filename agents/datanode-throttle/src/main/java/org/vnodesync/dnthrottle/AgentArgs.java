package org.vnodesync.dnthrottle;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** "-javaagent:<jar>=socket=<path>[,default_read_bps=N][,default_write_bps=N]"; bad parts are reported, not fatal. */
record AgentArgs(Path socket, long defaultReadBps, long defaultWriteBps, List<String> errors) {

    static AgentArgs parse(String text) {
        Path socket = null;
        long read = 0;
        long write = 0;
        List<String> errors = new ArrayList<>();
        if (text != null && !text.isEmpty()) {
            for (String part : text.split(",", -1)) {
                int eq = part.indexOf('=');
                String key = eq < 0 ? part : part.substring(0, eq);
                String value = eq < 0 ? "" : part.substring(eq + 1);
                try {
                    switch (key) {
                        case "socket" -> {
                            if (value.isEmpty() || !value.startsWith("/")) {
                                errors.add("socket must be an absolute path, got '" + ApplyParser.printable(value) + "'");
                            } else {
                                socket = Path.of(value);
                            }
                        }
                        case "default_read_bps" -> read = ApplyParser.number("default_read_bps", value);
                        case "default_write_bps" -> write = ApplyParser.number("default_write_bps", value);
                        default -> errors.add("unknown agent argument '" + ApplyParser.printable(key) + "'");
                    }
                } catch (ApplyParser.BadApply e) {
                    errors.add(e.getMessage());
                }
            }
        }
        if (socket == null) {
            errors.add("no socket=<path>: the storage agent cannot set per-user rates");
        }
        return new AgentArgs(socket, read, write, List.copyOf(errors));
    }
}
