package org.vnodesync.datanode;

import java.util.regex.Pattern;

/** Values on the control channel, checked one way everywhere (DATANODE_CHANNEL.md). */
final class Wire {
    private static final Pattern USER = Pattern.compile("[a-z_][a-z0-9_-]{0,31}");
    private static final Pattern IP = Pattern.compile("[0-9a-fA-F:.]{2,45}");

    private Wire() {
    }

    static long rate(String text) {
        try {
            long value = Long.parseLong(text);
            if (value >= 0) {
                return value;
            }
        } catch (NumberFormatException e) {
            // refused below
        }
        throw new IllegalArgumentException("rate '" + text + "' must be a whole number of bytes/s, 0 or more");
    }

    static String user(String text) {
        if (!USER.matcher(text).matches()) {
            throw new IllegalArgumentException("user '" + text + "' is not a POSIX user name");
        }
        return text;
    }

    static int uid(String text) {
        try {
            long value = Long.parseLong(text);
            if (value >= 0 && value <= Integer.MAX_VALUE) {
                return (int) value;
            }
        } catch (NumberFormatException e) {
            // refused below
        }
        throw new IllegalArgumentException("uid '" + text + "' must be 0.." + Integer.MAX_VALUE);
    }

    static String ip(String text) {
        if (!IP.matcher(text).matches()) {
            throw new IllegalArgumentException("address '" + text + "' is not an IP address");
        }
        return text;
    }

    static int port(String text) {
        try {
            int value = Integer.parseInt(text);
            if (value > 0 && value < 65536) {
                return value;
            }
        } catch (NumberFormatException e) {
            // refused below
        }
        throw new IllegalArgumentException("port '" + text + "' must be 1..65535");
    }
}
