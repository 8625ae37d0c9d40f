package org.vnodesync.dnthrottle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

/** The weighted scheduler on a simulated DataNode (SimulatedNode): what the issue asks of the edge. */
class SchedulerTest {
    private static final double MB = 1e6;
    private static final long CONFIGURED = 60_000_000L;

    private static Policy.Shares weight(double w) {
        return new Policy.Shares(new Policy.Share(w, 0, 0), new Policy.Share(w, 0, 0));
    }

    private static Policy.Shares share(double w, long floor, long ceiling) {
        return new Policy.Shares(new Policy.Share(w, floor, ceiling), new Policy.Share(w, floor, ceiling));
    }

    private static Policy policy(long capacity, Map<String, Policy.Shares> users) {
        return new Policy(1, new Policy.Node(capacity, capacity, List.of()), Policy.Shares.NONE, users, Map.of(),
                Map.of());
    }

    private static SimulatedNode node(double delivers, boolean control, Map<String, Policy.Shares> users) {
        SimulatedNode node = new SimulatedNode(delivers, control);
        node.throttles.apply(policy(CONFIGURED, users));
        return node;
    }

    @ParameterizedTest(name = "node delivers {0} MB/s of 60 configured")
    @ValueSource(doubles = {60, 55, 40, 20})
    void twoBackloggedUsersAtWeights8And4Get2To1AtAnyCapacityBelowConfigured(double delivers) {
        SimulatedNode node = node(delivers * MB, true, Map.of("alice", weight(8), "bob", weight(4)));
        node.backlogged("alice");
        node.backlogged("bob");
        node.runFor(3 * SimulatedNode.SECOND);   // R settles on what the node delivers
        Map<String, Double> r = node.rates(10);
        double ratio = r.get("alice") / r.get("bob");
        assertEquals(2.0, ratio, 0.1, "alice/bob " + r);
        assertTrue(r.get("alice") + r.get("bob") >= 0.92 * delivers * MB, "node used " + r);
    }

    @Test
    void withoutTheCapacityControlRAboveWhatTheNodeDeliversFallsTowardTheNodesOwnSplit() {
        // The trap the control exists for: R fixed at the configured 60 while the node does 40.
        SimulatedNode node = node(40 * MB, false, Map.of("alice", weight(8), "bob", weight(4)));
        node.backlogged("alice");
        node.backlogged("bob");
        Map<String, Double> r = node.rates(10);
        assertTrue(r.get("alice") / r.get("bob") < 1.5, "with R above capacity the split is not by weight: " + r);
    }

    @Test
    void manyThreadsPerUserStillShareByWeight() {
        SimulatedNode node = node(60 * MB, true, Map.of("alice", weight(8), "bob", weight(4)));
        node.backlogged("alice");
        for (int i = 0; i < 10; i++) {
            node.backlogged("bob");   // bob's 10 connections against alice's one: 1:10 left alone
        }
        node.runFor(3 * SimulatedNode.SECOND);
        Map<String, Double> r = node.rates(10);
        assertEquals(2.0, r.get("alice") / r.get("bob"), 0.1, "alice/bob " + r);
    }

    @Test
    void aUserUsingLessThanItsShareLeavesTheRestToTheOthers() {
        SimulatedNode node = node(60 * MB, true, Map.of("alice", weight(8), "bob", weight(4)));
        node.add(new SimulatedNode.Worker(node.throttles.chargeFor("alice"), 10 * MB, 0, 0, node.now()));  // slow client
        node.backlogged("bob");
        node.runFor(3 * SimulatedNode.SECOND);
        Map<String, Double> r = node.rates(10);
        assertEquals(10 * MB, r.get("alice"), 0.3 * MB, "alice reads as fast as her client: " + r);
        // The node is saturated (10 + 50 = 60): R stays MARGIN under it; bob gets (nearly all) the rest of R.
        assertTrue(r.get("bob") >= 0.93 * (CapacityControl.MARGIN * 60 * MB - 10 * MB), "bob gets what alice leaves: " + r);
    }

    @Test
    void anIdleUsersShareIsLentAtOnceAndItsNextTransferIsAsFastAsAtItsShare() {
        // alice (8) reads 4 MiB files with 1 s idle gaps beside bob (4), who never pauses.
        SimulatedNode node = node(60 * MB, true, Map.of("alice", weight(8), "bob", weight(4)));
        long file = 4 << 20;
        SimulatedNode.Worker alice = node.add(new SimulatedNode.Worker(node.throttles.chargeFor("alice"),
                Double.POSITIVE_INFINITY, file, SimulatedNode.SECOND, node.now() + SimulatedNode.SECOND));
        node.backlogged("bob");
        List<Double> bobWhileAliceIdle = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            // Sample bob in 50 ms windows; keep those where alice moved nothing (she was idle).
            long aliceBefore = node.moved("alice");
            double bob = node.rates(0.05).get("bob");
            if (node.moved("alice") == aliceBefore) {
                bobWhileAliceIdle.add(bob);
            }
        }
        node.runFor(10 * SimulatedNode.SECOND);
        assertTrue(alice.transfers.size() >= 6, "alice's files: " + alice.transfers.size());
        double atShare = file / (60 * MB * 8 / 12);   // seconds at her share with static caps
        for (long[] t : alice.transfers) {
            double seconds = (t[1] - t[0]) / 1e9;
            assertTrue(seconds <= 1.1 * atShare, "alice took " + seconds + " s, at her share " + atShare);
        }
        // Every 50 ms window in which alice was idle gave bob (nearly) the whole node: lent at once.
        assertTrue(!bobWhileAliceIdle.isEmpty());
        for (double bob : bobWhileAliceIdle) {
            assertTrue(bob >= 0.9 * 60 * MB, "bob while alice idle: " + bob / MB + " MB/s");
        }
    }

    @Test
    void aReturningUsersFirstPacketDoesNotWaitAtAll() {
        SimulatedNode node = node(60 * MB, true, Map.of("alice", weight(8), "bob", weight(4)));
        node.backlogged("bob");
        node.runFor(2 * SimulatedNode.SECOND);
        WeightedScheduler.Ticket ticket = new WeightedScheduler.Ticket();
        Flow alice = node.throttles.chargeFor("alice").read();
        long now = node.now();
        assertEquals(now, node.throttles.scheduler(Direction.READ).admit(alice, SimulatedNode.PACKET, now, ticket));
    }

    @Test
    void aCeilingHoldsAndWhatItLeavesGoesToTheOthers() {
        SimulatedNode node = node(60 * MB, true, Map.of("alice", share(8, 0, 20_000_000), "bob", weight(4)));
        node.backlogged("alice");
        node.backlogged("bob");
        node.runFor(3 * SimulatedNode.SECOND);
        Map<String, Double> r = node.rates(10);
        assertTrue(r.get("alice") <= 20.2 * MB, "alice's ceiling: " + r);
        assertTrue(r.get("bob") >= 0.95 * (CapacityControl.MARGIN * 60 * MB - 20 * MB), "bob gets the rest: " + r);
    }

    @Test
    void aFloorHoldsAgainstAHeavierWeight() {
        // alice's weight alone would give her 60/9 = 6.7 MB/s; her floor is 30.
        SimulatedNode node = node(60 * MB, true, Map.of("alice", share(1, 30_000_000, 0), "bob", weight(8)));
        node.backlogged("alice");
        node.backlogged("bob");
        node.runFor(3 * SimulatedNode.SECOND);
        Map<String, Double> r = node.rates(10);
        assertTrue(r.get("alice") >= 0.98 * 30 * MB, "alice's floor: " + r);
        assertTrue(r.get("alice") + r.get("bob") >= 0.92 * 60 * MB, "node used: " + r);
    }

    @Test
    void withNoCapacityConfiguredOnlyCeilingsHold() {
        SimulatedNode node = new SimulatedNode(60 * MB, true);
        node.throttles.apply(new Policy(1, Policy.Node.NONE, Policy.Shares.NONE,
                Map.of("alice", weight(8), "bob", share(4, 0, 10_000_000)), Map.of(), Map.of()));
        node.backlogged("alice");
        node.backlogged("bob");
        Map<String, Double> r = node.rates(5);
        assertEquals(10 * MB, r.get("bob"), 0.3 * MB);
        assertEquals(50 * MB, r.get("alice"), 1 * MB);
    }

    private static CapacityControl.Seen seen(double moved, double busiest) {
        return new CapacityControl.Seen(moved, busiest, 0.5, 2);
    }

    @Test
    void capacityControlKeepsRJustUnderWhatASaturatedNodeDeliversProbesBackAndRecovers() {
        long c = CONFIGURED;
        CapacityControl control = new CapacityControl();
        assertEquals(c, control.next(c, c, seen(30e6, 0.5)));        // not saturated: the configured capacity
        long r = Math.round(0.95 * 40e6);
        assertEquals(r, control.next(c, c, seen(40e6, 0.99)));       // saturation begins: just under the most moved
        assertTrue(control.held());
        assertEquals(r, control.next(c, r, seen(0.99 * r, 0.85)));   // a little less busy under R: R stays
        for (int i = 1; i < CapacityControl.LOWER_INTERVALS; i++) {  // short intervals are noise...
            assertEquals(r, control.next(c, r, seen(30e6, 0.99)));
        }
        long slowed = Math.round(0.95 * 30e6);
        assertEquals(slowed, control.next(c, r, seen(30e6, 0.99))); // ...many running: the node slowed
        assertEquals(slowed, control.next(c, slowed, seen(0.85 * slowed, 0.99)));   // less than that never lowers
        // Competing flows that hardly wait for their weight: R is above what they get: lower.
        CapacityControl.Seen notHeld = new CapacityControl.Seen(0.99 * slowed, 0.99, 0.01, 2);
        for (int i = 1; i < CapacityControl.LOWER_INTERVALS; i++) {
            assertEquals(slowed, control.next(c, slowed, notHeld));
        }
        long unheld = Math.round(0.95 * 0.99 * slowed);
        assertEquals(unheld, control.next(c, slowed, notHeld));
        assertEquals(slowed, Math.round(control.safe()), "a node that slowed a lot has a new level");
        // Held under the safe level: probes back up, ever sooner and larger, never past it.
        long now = unheld;
        int probes = 0;
        for (int i = 0; i < 100; i++) {
            long next = control.next(c, now, seen(now, 0.99));
            probes += next > now ? 1 : 0;
            now = next;
        }
        assertTrue(probes >= 1, "probes " + probes);
        assertEquals(slowed, now, "back at the safe level, no higher");
        // A probe answered by a lowering (flows stopped waiting for their weight): the safe level comes down.
        for (int i = 0; i < CapacityControl.LOWER_INTERVALS; i++) {
            now = control.next(c, slowed, notHeld);
        }
        long low = now;
        for (int i = 0; i < CapacityControl.PROBE_INTERVALS - 1; i++) {
            now = control.next(c, now, seen(now, 0.99));
        }
        long probed = control.next(c, now, seen(now, 0.99));
        assertTrue(probed > low, "probed " + probed);
        for (int i = 0; i < CapacityControl.LOWER_INTERVALS; i++) {
            control.next(c, probed, new CapacityControl.Seen(probed, 0.99, 0.01, 2));
        }
        assertEquals(low, Math.round(control.safe()));
        // Room again: saturation ends below RELEASED and R recovers quickly, never past the configured capacity.
        now = Math.round(0.95 * low);
        assertEquals(Math.round(now * 1.1), control.next(c, now, seen(now, 0.5)));
        assertEquals(c, control.next(c, 58_000_000L, seen(58e6, 0.5)));
        assertEquals(c, control.next(c, 20_000_000L, seen(0, 0.99)));   // idle: the configured capacity
        CapacityControl lowest = new CapacityControl();
        assertEquals(Math.round(CapacityControl.LOWEST * c), lowest.next(c, c, seen(2e6, 1.0)));   // never below LOWEST
        assertEquals(0, control.next(0, c, seen(40e6, 0.99)));        // nothing configured: weights off
    }

    @Test
    void rFollowsANodeThatSlowsDownAndFindsItAgainWhenItRecovers() {
        SimulatedNode node = node(60 * MB, true, Map.of("alice", weight(8), "bob", weight(4)));
        node.backlogged("alice");
        node.backlogged("bob");
        node.runFor(3 * SimulatedNode.SECOND);
        node.setServerBps(30 * MB);                                   // e.g. encryption turned on
        node.runFor(3 * SimulatedNode.SECOND);
        Map<String, Double> slow = node.rates(5);
        assertEquals(2.0, slow.get("alice") / slow.get("bob"), 0.1, "slowed: " + slow);
        node.setServerBps(60 * MB);
        node.runFor(10 * SimulatedNode.SECOND);
        Map<String, Double> back = node.rates(10);
        assertEquals(2.0, back.get("alice") / back.get("bob"), 0.2, "recovered: " + back);
        assertTrue(back.get("alice") + back.get("bob") >= 0.85 * 60 * MB, "R found the node again: " + back);
    }
}
