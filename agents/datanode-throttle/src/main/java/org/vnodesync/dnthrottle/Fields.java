package org.vnodesync.dnthrottle;

import java.util.HashMap;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * One line of the control protocol: a KIND, then key=value fields separated by single spaces. A key
 * this side does not know is ignored, so a newer peer may add one without breaking this one; a key
 * given twice, or a known key with a bad value, is an error.
 */
final class Fields {
    private static final Pattern KEY = Pattern.compile("^[a-z][a-z0-9_.]{0,63}$");
    private static final Pattern REAL = Pattern.compile("^[0-9]{1,15}(\\.[0-9]{1,15})?([eE][-+]?[0-9]{1,3})?$");

    final String kind;
    private final Map<String, String> values;

    private Fields(String kind, Map<String, String> values) {
        this.kind = kind;
        this.values = values;
    }

    static Fields parse(String line) throws ApplyParser.BadApply {
        String[] parts = line.split(" ", -1);
        Map<String, String> values = new HashMap<>();
        for (int i = 1; i < parts.length; i++) {
            int eq = parts[i].indexOf('=');
            String key = eq < 0 ? parts[i] : parts[i].substring(0, eq);
            if (eq < 0 || !KEY.matcher(key).matches()) {
                throw new ApplyParser.BadApply("field " + i + " '" + ApplyParser.printable(parts[i])
                        + "' is not key=value");
            }
            if (values.put(key, parts[i].substring(eq + 1)) != null) {
                throw new ApplyParser.BadApply("key " + key + " given twice");
            }
        }
        return new Fields(parts[0], values);
    }

    boolean has(String key) {
        return values.containsKey(key);
    }

    String text(String key) throws ApplyParser.BadApply {
        String value = values.get(key);
        if (value == null) {
            throw new ApplyParser.BadApply(kind + " needs " + key + "=");
        }
        return value;
    }

    /** A whole number >= 0; DEFAULT when the key is absent. */
    long number(String key, long fallback) throws ApplyParser.BadApply {
        String value = values.get(key);
        return value == null ? fallback : ApplyParser.number(key, value);
    }

    long number(String key) throws ApplyParser.BadApply {
        return ApplyParser.number(key, text(key));
    }

    /** A finite decimal >= 0 (a weight); DEFAULT when the key is absent. */
    double real(String key, double fallback) throws ApplyParser.BadApply {
        String value = values.get(key);
        if (value == null) {
            return fallback;
        }
        if (!REAL.matcher(value).matches()) {
            throw new ApplyParser.BadApply(key + ": not a non-negative decimal number: '"
                    + ApplyParser.printable(value) + "'");
        }
        double parsed = Double.parseDouble(value);
        if (!Double.isFinite(parsed)) {
            throw new ApplyParser.BadApply(key + ": too large: " + value);
        }
        return parsed;
    }
}
