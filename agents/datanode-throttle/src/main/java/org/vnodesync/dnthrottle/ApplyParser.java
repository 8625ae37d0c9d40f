package org.vnodesync.dnthrottle;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/** Parses the body of an APPLY (the lines between "APPLY <generation>" and "END") into a Policy, all or nothing. */
final class ApplyParser {
    static final Pattern USER_NAME = Pattern.compile("^[a-z_][a-z0-9_-]{0,31}$");
    private static final Pattern DECIMAL = Pattern.compile("^[0-9]{1,19}$");
    private static final Pattern IPV4 = Pattern.compile("^([0-9]{1,3})\\.([0-9]{1,3})\\.([0-9]{1,3})\\.([0-9]{1,3})$");
    private static final Pattern IPV6 = Pattern.compile("^[0-9A-Fa-f:.]{2,45}$");
    private static final long MAX_UID = 4_294_967_294L;

    static final class BadApply extends Exception {
        BadApply(String message) {
            super(message);
        }
    }

    private ApplyParser() {
    }

    static long generation(String text) throws BadApply {
        return number("generation", text);
    }

    /** DEFAULT may be left out: then the -javaagent defaults apply. */
    static Policy parse(long generation, List<String> lines, Policy.Rates fallbackDefaults) throws BadApply {
        Policy.Rates defaults = null;
        Map<String, Policy.Rates> users = new HashMap<>();
        Map<Long, String> uids = new HashMap<>();
        Map<Policy.Endpoint, String> connections = new HashMap<>();
        int lineNo = 0;
        for (String line : lines) {
            lineNo++;
            String[] f = line.split(" ", -1);
            String where = "line " + lineNo + " '" + printable(line) + "': ";
            switch (f[0]) {
                case "DEFAULT" -> {
                    arity(where, f, 3);
                    if (defaults != null) {
                        throw new BadApply(where + "DEFAULT given twice");
                    }
                    defaults = new Policy.Rates(number(where + "read_bps", f[1]), number(where + "write_bps", f[2]));
                }
                case "USER" -> {
                    arity(where, f, 4);
                    String name = name(where, f[1]);
                    Policy.Rates rates = new Policy.Rates(number(where + "read_bps", f[2]), number(where + "write_bps", f[3]));
                    if (users.put(name, rates) != null) {
                        throw new BadApply(where + "user " + name + " given twice");
                    }
                }
                case "UID" -> {
                    arity(where, f, 3);
                    long uid = number(where + "uid", f[1]);
                    if (uid > MAX_UID) {
                        throw new BadApply(where + "uid out of range");
                    }
                    if (uids.put(uid, name(where, f[2])) != null) {
                        throw new BadApply(where + "uid " + uid + " given twice");
                    }
                }
                case "CONN" -> {
                    arity(where, f, 4);
                    InetAddress address = ipLiteral(where, f[1]);
                    long port = number(where + "client_port", f[2]);
                    if (port < 1 || port > 65535) {
                        throw new BadApply(where + "client_port out of range");
                    }
                    Policy.Endpoint endpoint = new Policy.Endpoint(address, (int) port);
                    if (connections.put(endpoint, name(where, f[3])) != null) {
                        throw new BadApply(where + "connection given twice");
                    }
                }
                default -> throw new BadApply(where + "expected DEFAULT, USER, UID, CONN or END");
            }
        }
        return new Policy(generation, defaults != null ? defaults : fallbackDefaults,
                Map.copyOf(users), Map.copyOf(uids), Map.copyOf(connections));
    }

    static long number(String what, String text) throws BadApply {
        if (!DECIMAL.matcher(text).matches()) {
            throw new BadApply(what + ": not a non-negative decimal number: '" + printable(text) + "'");
        }
        try {
            return Long.parseLong(text);
        } catch (NumberFormatException e) {
            throw new BadApply(what + ": too large: " + text);
        }
    }

    private static void arity(String where, String[] fields, int expected) throws BadApply {
        if (fields.length != expected) {
            throw new BadApply(where + "expected " + (expected - 1) + " fields after " + fields[0] + ", got "
                    + (fields.length - 1));
        }
    }

    private static String name(String where, String text) throws BadApply {
        if (!USER_NAME.matcher(text).matches()) {
            throw new BadApply(where + "not a user name: '" + printable(text) + "'");
        }
        return text;
    }

    /** A numeric address only: a host name here would mean a DNS lookup inside the DataNode. */
    static InetAddress ipLiteral(String where, String text) throws BadApply {
        var v4 = IPV4.matcher(text);
        if (v4.matches()) {
            byte[] bytes = new byte[4];
            for (int i = 0; i < 4; i++) {
                int octet = Integer.parseInt(v4.group(i + 1));
                if (octet > 255) {
                    throw new BadApply(where + "not an IP address: '" + printable(text) + "'");
                }
                bytes[i] = (byte) octet;
            }
            return byAddress(where, text, bytes);
        }
        if (IPV6.matcher(text).matches() && text.contains(":")) {
            try {
                // A literal with ':' is parsed, never resolved.
                return InetAddress.getByName(text);
            } catch (UnknownHostException | SecurityException e) {
                throw new BadApply(where + "not an IP address: '" + printable(text) + "'");
            }
        }
        throw new BadApply(where + "not an IP address: '" + printable(text) + "'");
    }

    private static InetAddress byAddress(String where, String text, byte[] bytes) throws BadApply {
        try {
            return InetAddress.getByAddress(bytes);
        } catch (UnknownHostException e) {
            throw new BadApply(where + "not an IP address: '" + printable(text) + "'");
        }
    }

    static String printable(String text) {
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < text.length() && out.length() < 80; i++) {
            char c = text.charAt(i);
            out.append(c >= 0x20 && c < 0x7f ? c : '?');
        }
        return out.toString();
    }
}
