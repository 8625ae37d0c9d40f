package org.vnodesync.dnthrottle;

import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;

/**
 * What became of each hook: woven into Hadoop's method, skipped by an agent setting, not found (the
 * class or a method with the argument the advice reads is missing: another Hadoop), failed (Byte
 * Buddy refused), or pending (its class not loaded yet). The storage agent reads it in the handshake
 * and reports the node as not enforcing unless every hook it needs is woven.
 */
final class HookReport {
    static final String WOVEN = "woven";
    static final String SKIPPED = "skipped";
    static final String NOT_FOUND = "not_found";
    static final String FAILED = "failed";
    static final String PENDING = "pending";

    private final Map<String, String> states = new ConcurrentSkipListMap<>();

    void set(String hook, String state) {
        states.put(hook, state);
    }

    /** Sets STATE if the hook is still pending (its class not seen yet). */
    void setIfPending(String hook, String state) {
        states.merge(hook, state, (old, next) -> old.equals(PENDING) ? next : old);
    }

    String state(String hook) {
        return states.getOrDefault(hook, PENDING);
    }

    /** "hook.DataXceiver.readBlock=woven hook.BlockSender.sendBlock=skipped ..." */
    String fields() {
        StringBuilder out = new StringBuilder();
        states.forEach((hook, state) -> out.append(out.length() == 0 ? "" : " ").append("hook.").append(hook)
                .append('=').append(state));
        return out.toString();
    }
}
