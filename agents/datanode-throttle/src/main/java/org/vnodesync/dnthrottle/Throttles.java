package org.vnodesync.dnthrottle;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The current rate set plus every user's buckets and counters. APPLY swaps the whole Policy with one
 * volatile write; buckets and counters of users that left are kept (counters are monotonic).
 */
final class Throttles {
    static final String DEFAULT = "DEFAULT";

    /** What one op is charged to: a user (or DEFAULT), its counters and its buckets. */
    record Charge(String name, UserCounters counters, RateBucket read, RateBucket write) {
        RateBucket bucket(Direction direction) {
            return direction == Direction.READ ? read : write;
        }
    }

    private final long startedMs;
    private final Policy.Rates startDefaults;
    private volatile Policy policy;
    private final Charge defaultCharge;
    private final Map<String, Charge> users = new ConcurrentHashMap<>();

    Throttles(Policy.Rates defaults, long startedMs) {
        this.startedMs = startedMs;
        this.startDefaults = defaults;
        this.policy = Policy.initial(defaults);
        this.defaultCharge = new Charge(DEFAULT, new UserCounters(), new RateBucket(defaults.readBps()),
                new RateBucket(defaults.writeBps()));
    }

    long startedMs() {
        return startedMs;
    }

    /** The -javaagent defaults: what DEFAULT is when an APPLY leaves it out. */
    Policy.Rates startDefaults() {
        return startDefaults;
    }

    Policy policy() {
        return policy;
    }

    synchronized void apply(Policy next) {
        defaultCharge.read().setRate(next.defaults().readBps());
        defaultCharge.write().setRate(next.defaults().writeBps());
        next.users().forEach((name, rates) -> {
            Charge charge = users.computeIfAbsent(name, n -> new Charge(n, new UserCounters(),
                    new RateBucket(rates.readBps()), new RateBucket(rates.writeBps())));
            charge.read().setRate(rates.readBps());
            charge.write().setRate(rates.writeBps());
        });
        policy = next;
    }

    /** The charge of a resolved user name; unknown or unlisted users (and null) get DEFAULT. */
    Charge chargeFor(String user) {
        if (user == null || !policy.users().containsKey(user)) {
            return defaultCharge;
        }
        Charge charge = users.get(user);
        return charge != null ? charge : defaultCharge;
    }

    /** STATS body lines (without the final OK). */
    String stats() {
        StringBuilder out = new StringBuilder();
        out.append("STARTED ").append(startedMs).append('\n');
        out.append("DEFAULT ").append(defaultCharge.counters().line()).append('\n');
        new TreeMap<>(users).forEach((name, charge) ->
                out.append("USER ").append(name).append(' ').append(charge.counters().line()).append('\n'));
        return out.toString();
    }
}
