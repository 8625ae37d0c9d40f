package org.vnodesync.dnthrottle;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The current set plus every user's flows and counters, and the node's two schedulers (reads, writes).
 * APPLY swaps the whole Policy with one volatile write after moving weights, floors and ceilings;
 * flows and counters of users that left are kept (counters are monotonic).
 */
final class Throttles {
    static final String DEFAULT = "DEFAULT";

    /** What one op is charged to: a user (or DEFAULT), its counters and its flow in each direction. */
    static final class Charge {
        private final String name;
        private final UserCounters counters;
        private final Flow read;
        private final Flow write;

        Charge(String name, UserCounters counters, Flow read, Flow write) {
            this.name = name;
            this.counters = counters;
            this.read = read;
            this.write = write;
        }

        String name() {
            return name;
        }

        UserCounters counters() {
            return counters;
        }

        Flow read() {
            return read;
        }

        Flow write() {
            return write;
        }

        Flow flow(Direction direction) {
            return direction == Direction.READ ? read : write;
        }
    }

    private final long startedMs;
    private final Policy.Shares startDefaults;
    private volatile Policy policy;
    private final Charge defaultCharge;
    private final Map<String, Charge> users = new ConcurrentHashMap<>();
    private final WeightedScheduler reads = WeightedScheduler.forReads();
    private final WeightedScheduler writes = WeightedScheduler.forWrites();

    private final UserThrottler.Clock clock;

    Throttles(Policy.Shares defaults, long startedMs) {
        this(defaults, startedMs, UserThrottler.SYSTEM_CLOCK);
    }

    Throttles(Policy.Shares defaults, long startedMs, UserThrottler.Clock clock) {
        this.clock = clock;
        this.startedMs = startedMs;
        this.startDefaults = defaults;
        this.policy = Policy.initial(defaults);
        this.defaultCharge = newCharge(DEFAULT);
        share(defaultCharge, defaults, clock.nanoTime());
    }

    long startedMs() {
        return startedMs;
    }

    /** The -javaagent defaults: what DEFAULT is when an APPLY leaves it out. */
    Policy.Shares startDefaults() {
        return startDefaults;
    }

    Policy policy() {
        return policy;
    }

    WeightedScheduler scheduler(Direction direction) {
        return direction == Direction.READ ? reads : writes;
    }

    synchronized void apply(Policy next) {
        long now = clock.nanoTime();
        for (Direction direction : Direction.values()) {
            // A new capacity holds at once; CapacityControl moves R below it from there.
            long capacity = next.node().capacity(direction);
            WeightedScheduler scheduler = scheduler(direction);
            scheduler.setConfigured(capacity);
            if (capacity != policy.node().capacity(direction) || scheduler.rate() > capacity) {
                scheduler.setRate(capacity, now);
            }
        }
        share(defaultCharge, next.defaults(), now);
        next.users().forEach((name, shares) -> share(users.computeIfAbsent(name, this::newCharge), shares, now));
        users.forEach((name, charge) -> {
            if (!next.users().containsKey(name)) {
                share(charge, Policy.Shares.NONE, now);  // left: its ops still running keep going unscheduled
            }
        });
        policy = next;
    }

    private Charge newCharge(String name) {
        return new Charge(name, new UserCounters(), new Flow(name), new Flow(name));
    }

    private void share(Charge charge, Policy.Shares shares, long now) {
        for (Direction direction : Direction.values()) {
            Policy.Share share = shares.of(direction);
            Flow flow = charge.flow(direction);
            flow.ceiling.setRate(share.ceilingBps());
            flow.floor.setRate(share.floorBps());
            scheduler(direction).setWeight(flow, share.weight(), now);
        }
    }

    /** The charge of a resolved user name; unknown or unlisted users (and null) get DEFAULT. */
    Charge chargeFor(String user) {
        if (user == null || !policy.users().containsKey(user)) {
            return defaultCharge;
        }
        Charge charge = users.get(user);
        return charge != null ? charge : defaultCharge;
    }

    /** STATS body lines for the users (without the NODE line and the final OK). */
    String stats() {
        StringBuilder out = new StringBuilder();
        out.append("DEFAULT ").append(defaultCharge.counters().fields()).append('\n');
        new TreeMap<>(users).forEach((name, charge) ->
                out.append("USER name=").append(name).append(' ').append(charge.counters().fields()).append('\n'));
        return out.toString();
    }
}
