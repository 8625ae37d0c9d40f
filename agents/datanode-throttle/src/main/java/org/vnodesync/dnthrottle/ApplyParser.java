package org.vnodesync.dnthrottle;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Parses the body of an APPLY (the lines between "APPLY generation=N" and "END") into a Policy, all or
 * nothing. Lines are KIND key=value...: keys and kinds this agent does not know are skipped (a newer
 * storage agent may send more), a known key with a bad value refuses the whole set.
 */
final class ApplyParser {
    /** A VNode: a user's (its name) or one of its batch jobs' ("user.job", vnode_sync.validation.vnode_name). */
    static final Pattern VNODE_NAME = Pattern.compile(
            "^[a-z_][a-z0-9_-]{0,31}(\\.[0-9]{1,20}(_[0-9]{1,10}|-[0-9]{0,10})?(\\.[a-z0-9-]{1,63}){0,8})?$");
    private static final Pattern DECIMAL = Pattern.compile("^[0-9]{1,19}$");
    private static final Pattern IPV4 = Pattern.compile("^([0-9]{1,3})\\.([0-9]{1,3})\\.([0-9]{1,3})\\.([0-9]{1,3})$");
    private static final Pattern IPV6 = Pattern.compile("^[0-9A-Fa-f:.]{2,45}$");
    private static final Pattern DEVICE = Pattern.compile("^([0-9]{1,9}):([0-9]{1,9})$");
    private static final long MAX_UID = 4_294_967_294L;

    static final class BadApply extends Exception {
        BadApply(String message) {
            super(message);
        }
    }

    /** A parsed set and how many lines of kinds this agent does not know it skipped. */
    static final class Parsed {
        private final Policy policy;
        private final int skipped;

        Parsed(Policy policy, int skipped) {
            this.policy = policy;
            this.skipped = skipped;
        }

        Policy policy() {
            return policy;
        }

        int skipped() {
            return skipped;
        }
    }

    private ApplyParser() {
    }

    /** "generation=N" of the APPLY line. */
    static long generation(String header) throws BadApply {
        Fields f = Fields.parse(header);
        if (!f.kind.equals("APPLY")) {
            throw new BadApply("usage: APPLY generation=<n>");
        }
        return f.number("generation");
    }

    /** DEFAULT may be left out: then the -javaagent defaults apply. */
    static Parsed parse(long generation, List<String> lines, Policy.Shares fallbackDefaults) throws BadApply {
        Policy.Node node = Policy.Node.NONE;
        Policy.Shares defaults = null;
        Map<String, Policy.Shares> users = new HashMap<>();
        Map<Long, String> uids = new HashMap<>();
        Map<Policy.Endpoint, String> connections = new HashMap<>();
        boolean nodeSeen = false;
        int skipped = 0;
        int lineNo = 0;
        for (String line : lines) {
            lineNo++;
            String where = "line " + lineNo + " '" + printable(line) + "': ";
            try {
                Fields f = Fields.parse(line);
                switch (f.kind) {
                    case "NODE":
                        if (nodeSeen) {
                            throw new BadApply("NODE given twice");
                        }
                        nodeSeen = true;
                        node = new Policy.Node(f.number("read_capacity_bps", 0), f.number("write_capacity_bps", 0),
                                devices(f.has("devices") ? f.text("devices") : ""));
                        break;
                    case "DEFAULT":
                        if (defaults != null) {
                            throw new BadApply("DEFAULT given twice");
                        }
                        defaults = shares(f);
                        break;
                    case "USER": {
                        String name = name(f.text("name"));
                        if (users.put(name, shares(f)) != null) {
                            throw new BadApply("user " + name + " given twice");
                        }
                        break;
                    }
                    case "UID": {
                        long uid = f.number("uid");
                        if (uid > MAX_UID) {
                            throw new BadApply("uid out of range");
                        }
                        if (uids.put(uid, name(f.text("name"))) != null) {
                            throw new BadApply("uid " + uid + " given twice");
                        }
                        break;
                    }
                    case "CONN": {
                        InetAddress address = ipLiteral("", f.text("ip"));
                        long port = f.number("port");
                        if (port < 1 || port > 65535) {
                            throw new BadApply("port out of range");
                        }
                        Policy.Endpoint endpoint = new Policy.Endpoint(address, (int) port);
                        if (connections.put(endpoint, name(f.text("name"))) != null) {
                            throw new BadApply("connection given twice");
                        }
                        break;
                    }
                    default:
                        if (!f.kind.matches("^[A-Z][A-Z0-9_]{0,31}$")) {
                            throw new BadApply("not a line kind: '" + printable(f.kind) + "'");
                        }
                        skipped++;  // a kind a newer storage agent knows and this agent does not
                }
            } catch (BadApply e) {
                throw new BadApply(where + e.getMessage());
            }
        }
        Policy policy = new Policy(generation, node, defaults != null ? defaults : fallbackDefaults,
                Collections.unmodifiableMap(users), Collections.unmodifiableMap(uids),
                Collections.unmodifiableMap(connections));
        return new Parsed(policy, skipped);
    }

    private static Policy.Shares shares(Fields f) throws BadApply {
        return new Policy.Shares(
                new Policy.Share(f.real("read_weight", 0), f.number("read_floor_bps", 0), f.number("read_ceiling_bps", 0)),
                new Policy.Share(f.real("write_weight", 0), f.number("write_floor_bps", 0), f.number("write_ceiling_bps", 0)));
    }

    private static List<DeviceId> devices(String text) throws BadApply {
        List<DeviceId> out = new ArrayList<>();
        if (text.isEmpty()) {
            return out;
        }
        for (String part : text.split(",", -1)) {
            Matcher m = DEVICE.matcher(part);
            if (!m.matches()) {
                throw new BadApply("devices: not MAJ:MIN: '" + printable(part) + "'");
            }
            out.add(new DeviceId(Integer.parseInt(m.group(1)), Integer.parseInt(m.group(2))));
        }
        return out;
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

    private static String name(String text) throws BadApply {
        if (!VNODE_NAME.matcher(text).matches() || text.length() > 97) {
            throw new BadApply("not a user or job VNode name: '" + printable(text) + "'");
        }
        return text;
    }

    /** A numeric address only: a host name here would mean a DNS lookup inside the DataNode. */
    static InetAddress ipLiteral(String where, String text) throws BadApply {
        Matcher v4 = IPV4.matcher(text);
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
