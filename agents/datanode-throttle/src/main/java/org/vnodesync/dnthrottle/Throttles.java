package org.vnodesync.dnthrottle;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The current set plus every user's shares and counters, and one Dispatcher per data volume (reads and
 * writes of a volume share it: one disk serves both from one queue). APPLY swaps the whole Policy with
 * one volatile write after moving weights, floors and ceilings; shares and counters of users that left
 * are kept (counters are monotonic).
 */
final class Throttles {
    static final String DEFAULT = "DEFAULT";
    /** The dispatcher of ops whose volume is not known (a Hadoop whose internals differ): the node as one volume. */
    static final String WHOLE_NODE = "node";

    /** What one op is charged to: a user (or DEFAULT), its counters and its share in each direction. */
    static final class Charge {
        private final String name;
        private final UserCounters counters = new UserCounters();
        private final UserShare read = new UserShare();
        private final UserShare write = new UserShare();

        Charge(String name) {
            this.name = name;
        }

        String name() {
            return name;
        }

        UserCounters counters() {
            return counters;
        }

        UserShare read() {
            return read;
        }

        UserShare write() {
            return write;
        }

        UserShare share(Direction direction) {
            return direction == Direction.READ ? read : write;
        }
    }

    private final long startedMs;
    private final Policy.Shares startDefaults;
    private volatile Policy policy;
    private final Charge defaultCharge;
    private final Map<String, Charge> users = new ConcurrentHashMap<>();
    private final Map<String, Dispatcher> volumes = new ConcurrentHashMap<>();
    /** Each volume's read packets' copy and send, a resource of their own where the read-ahead reads (ReadAhead). */
    private final Map<String, Dispatcher> packets = new ConcurrentHashMap<>();
    /** Each volume's flows, by charge: one per (user, volume), made at the user's first op there. */
    private final Map<Dispatcher, Map<Charge, Flow>> flows = new ConcurrentHashMap<>();

    Throttles(Policy.Shares defaults, long startedMs) {
        this.startedMs = startedMs;
        this.startDefaults = defaults;
        this.policy = Policy.initial(defaults);
        this.defaultCharge = new Charge(DEFAULT);
        share(defaultCharge, defaults);
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

    /** The dispatcher of VOLUME (a storage ID, or WHOLE_NODE), made at its first op. */
    Dispatcher volume(String volume) {
        Dispatcher d = volumes.get(volume);
        return d != null ? d : volumes.computeIfAbsent(volume, Dispatcher::new);
    }

    List<Dispatcher> volumes() {
        return new ArrayList<>(new TreeMap<>(volumes).values());
    }

    /**
     * The dispatcher of the copy and send of VOLUME's read packets whose disk reads are their read-ahead's
     * (docs/edge.md, section 1 item 6), made at its first: "VOLUME.packets".
     */
    Dispatcher packets(String volume) {
        Dispatcher d = packets.get(volume);
        return d != null ? d : packets.computeIfAbsent(volume, v -> new Dispatcher(v + ".packets"));
    }

    /** Every dispatcher, the volumes' and their packets': each has intervals and a depth of its own (DepthLoop). */
    List<Dispatcher> dispatchers() {
        List<Dispatcher> all = volumes();
        all.addAll(new TreeMap<>(packets).values());
        return all;
    }

    /** CHARGE's flow at DISPATCHER. */
    Flow flow(Dispatcher dispatcher, Charge charge) {
        Map<Charge, Flow> byCharge = flows.computeIfAbsent(dispatcher, d -> new ConcurrentHashMap<>());
        Flow flow = byCharge.get(charge);
        return flow != null ? flow : byCharge.computeIfAbsent(charge, Flow::new);
    }

    synchronized void apply(Policy next) {
        share(defaultCharge, next.defaults());
        next.users().forEach((name, shares) -> share(users.computeIfAbsent(name, Charge::new), shares));
        users.forEach((name, charge) -> {
            if (!next.users().containsKey(name)) {
                share(charge, Policy.Shares.NONE);  // left: its ops still running keep going unscheduled
            }
        });
        policy = next;
    }

    private void share(Charge charge, Policy.Shares shares) {
        for (Direction direction : Direction.values()) {
            Policy.Share share = shares.of(direction);
            UserShare mine = charge.share(direction);
            mine.ceiling.setRate(share.ceilingBps());
            mine.floor.setRate(share.floorBps());
            double next = share.weight() > 0 && !Double.isInfinite(share.weight()) ? share.weight() : 0;
            double before = mine.weight;
            mine.weight = next;
            if (before != next) {
                flows.forEach((dispatcher, byCharge) -> {
                    Flow flow = byCharge.get(charge);
                    if (flow != null) {
                        dispatcher.reweigh(flow, before, next);
                    }
                });
            }
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

    /** Whether another user than CHARGE's has a packet waiting or in flight at any volume. */
    boolean busyBesides(Charge charge) {
        for (Map.Entry<Dispatcher, Map<Charge, Flow>> e : flows.entrySet()) {
            Flow mine = e.getValue().get(charge);
            if (e.getKey().busyBesides(mine)) {
                return true;
            }
        }
        return false;
    }

    /** The most any volume moved over its last interval, bytes/s (0: none known). */
    double busiestVolumeBps() {
        double most = 0;
        for (Dispatcher d : volumes.values()) {
            most = Math.max(most, d.movedBps());
        }
        return most;
    }

    /** STATS body lines for the volumes and the users (without the NODE line and the final OK). */
    String stats() {
        StringBuilder out = new StringBuilder();
        for (Dispatcher d : volumes()) {
            out.append(d.statsLine()).append('\n');
        }
        out.append("DEFAULT ").append(defaultCharge.counters().fields()).append('\n');
        new TreeMap<>(users).forEach((name, charge) ->
                out.append("USER name=").append(name).append(' ').append(charge.counters().fields()).append('\n'));
        return out.toString();
    }
}
