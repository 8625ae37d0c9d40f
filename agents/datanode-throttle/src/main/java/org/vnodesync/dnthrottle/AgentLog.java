package org.vnodesync.dnthrottle;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Logs through the DataNode's own slf4j (so lines land in the DataNode log); System.err if slf4j is absent.
 * Errors are logged once per kind so a broken path cannot flood the log.
 */
final class AgentLog {
    private static final String NAME = "org.vnodesync.dnthrottle";
    private static final Set<String> SEEN = ConcurrentHashMap.newKeySet();
    private static volatile Object logger;

    private AgentLog() {
    }

    static void info(String message) {
        try {
            slf4j().info(message);
        } catch (Throwable t) {
            System.err.println("INFO " + NAME + ": " + message);
        }
    }

    static void warn(String message) {
        try {
            slf4j().warn(message);
        } catch (Throwable t) {
            System.err.println("WARN " + NAME + ": " + message);
        }
    }

    static void once(String kind, String message, Throwable error) {
        if (!SEEN.add(kind)) {
            return;
        }
        String line = message + " (logged once): " + error;
        try {
            slf4j().error(line, error);
        } catch (Throwable t) {
            System.err.println("ERROR " + NAME + ": " + line);
        }
    }

    private static org.slf4j.Logger slf4j() {
        Object current = logger;
        if (current == null) {
            current = org.slf4j.LoggerFactory.getLogger(NAME);
            logger = current;
        }
        return (org.slf4j.Logger) current;
    }
}
