package org.vnodesync.datanode;

/** The -javaagent argument: comma-separated key=value; unknown keys and bad numbers are refused. */
final class AgentArguments {
    final String socket;
    final long defaultReadBps;
    final long defaultWriteBps;

    private AgentArguments(String socket, long read, long write) {
        this.socket = socket;
        this.defaultReadBps = read;
        this.defaultWriteBps = write;
    }

    static AgentArguments parse(String text) {
        String socket = null;
        long read = 0;
        long write = 0;
        for (String item : (text == null ? "" : text).split(",")) {
            if (item.isBlank()) {
                continue;
            }
            int eq = item.indexOf('=');
            String key = eq < 0 ? item : item.substring(0, eq);
            String value = eq < 0 ? "" : item.substring(eq + 1);
            switch (key) {
                case "socket" -> socket = value;
                case "default_read_bps" -> read = Wire.rate(value);
                case "default_write_bps" -> write = Wire.rate(value);
                default -> throw new IllegalArgumentException("unknown agent argument '" + key
                        + "' (allowed: socket, default_read_bps, default_write_bps)");
            }
        }
        return new AgentArguments(socket, read, write);
    }
}
