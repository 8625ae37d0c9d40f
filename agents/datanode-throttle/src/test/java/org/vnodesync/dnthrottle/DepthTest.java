package org.vnodesync.dnthrottle;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.function.IntToDoubleFunction;
import org.junit.jupiter.api.Test;

/** The depth against throughput curves of known shape: Depth.interval's whole contract. */
class DepthTest {
    /** No user's own rate: only the volume's is judged. */
    private static final Map<Object, Double> NOBODY = Collections.emptyMap();

    /** The depth after INTERVALS binding intervals of two users whose bytes/s at each depth are ALICE(d) and BOB(d). */
    private static int settleUsers(IntToDoubleFunction alice, IntToDoubleFunction bob, int intervals) {
        Depth depth = new Depth();
        int d = depth.depth();
        for (int i = 0; i < intervals; i++) {
            Map<Object, Double> users = new HashMap<>();
            users.put("alice", alice.applyAsDouble(d));
            users.put("bob", bob.applyAsDouble(d));
            d = depth.interval(users.get("alice") + users.get("bob"), true, 2, users);
        }
        return d;
    }

    @Test
    void aDeeperQueueThatTakesFromAUserIsNotKept() {
        // one reader a user at 8 : 4 on a disk: depth 1 splits 40 : 20, depth 2 moves 20 % more but
        // splits it 36 : 36 (the testbed's paced disk): a different split, not a gain
        assertEquals(1, settleUsers(d -> d == 1 ? 40e6 : 36e6, d -> d == 1 ? 20e6 : 36e6, 2000));
    }

    @Test
    void aDeeperQueueEveryUserGainsFromIsKept() {
        // two CPU-bound threads at 8 : 4: depth 1 gives them 2/3 and 1/3 of one core, depth 2 a core each
        assertEquals(2, settleUsers(d -> d == 1 ? 67e6 : 100e6, d -> d == 1 ? 33e6 : 100e6, 2000));
    }
    /** The depth after INTERVALS binding intervals on a volume that moves CURVE(depth) bytes/s. */
    private static int settle(IntToDoubleFunction curve, int intervals) {
        return settle(curve, intervals, 2);
    }

    /** The same with SHARERS users moving at the volume. */
    private static int settle(IntToDoubleFunction curve, int intervals, int sharers) {
        Depth depth = new Depth();
        int d = depth.depth();
        for (int i = 0; i < intervals; i++) {
            d = depth.interval(curve.applyAsDouble(d), true, sharers, NOBODY);
        }
        return d;
    }

    @Test
    void aSaturatedDiskStaysAtOne() {
        assertEquals(1, settle(d -> 100e6, 2000));
    }

    @Test
    void cpuBoundCoresSettleAtTheirNumber() {
        assertEquals(2, settle(d -> 30e6 * Math.min(d, 2), 2000));
        assertEquals(4, settle(d -> 30e6 * Math.min(d, 4), 2000));
    }

    @Test
    void aDiskThatGainsUnderTheTargetFromDepthIsNotDeepened() {
        // +4 % from a second request is less than the throughput the weights may cost (5 %)
        assertEquals(1, settle(d -> 100e6 * Math.min(1.2, 1 + 0.04 * (d - 1)), 2000));
    }

    @Test
    void aDiskThatGainsOverTheTargetFromDepthIsDeepenedUntilItDoesNot() {
        // +20 %, +17 %, +14 %, then nothing: the weights may not cost the node 5 %
        assertEquals(4, settle(d -> 100e6 * Math.min(1.6, 1 + 0.2 * (d - 1)), 2000));
    }

    /** The depth after INTERVALS binding intervals of CURVE(depth) bytes/s, each off by NOISE (a fraction, uniform) at random. */
    private static int settleNoisy(IntToDoubleFunction curve, double noise, int intervals, long seed) {
        java.util.Random random = new java.util.Random(seed);
        Depth depth = new Depth();
        int d = depth.depth();
        for (int i = 0; i < intervals; i++) {
            d = depth.interval(curve.applyAsDouble(d) * (1 + noise * (2 * random.nextDouble() - 1)), true, 2, NOBODY);
        }
        return d;
    }

    @Test
    void twoCoresTheClientsShareReachTheirDepthThroughTheNoise() {
        // a CPU-bound node whose second core gains +45 % (clients on the same cores: less than Little's
        // law's +100 %), each interval off by up to 15 %
        for (long seed = 0; seed < 20; seed++) {
            assertEquals(2, settleNoisy(d -> 100e6 * (d >= 2 ? 1.45 : 1), 0.15, 600, seed), "seed " + seed);
        }
    }

    @Test
    void aSaturatedDiskStaysAtOneThroughTheNoise() {
        int deeper = 0;
        for (long seed = 0; seed < 20; seed++) {
            deeper += settleNoisy(d -> 100e6, 0.15, 600, seed) > 1 ? 1 : 0;
        }
        assertEquals(0, deeper);
    }

    @Test
    void anIntervalWithOneUserSaysNothingAboutTheDepth() {
        // nobody to order there (the dispatcher bounds nothing): the depth waits for users who share,
        // probes included, whatever the lone user keeps in flight or moves
        Depth depth = new Depth();
        int d = depth.depth();
        for (int i = 0; i < 100; i++) {
            d = depth.interval(30e6 * Math.min(d, 3), true, 2, NOBODY);
        }
        assertEquals(3, d);
        for (int i = 0; i < 2000; i++) {
            assertEquals(3, depth.interval(i % 2 == 0 ? 10e6 : 300e6, i % 3 != 0, 1, NOBODY));
        }
        assertEquals(Depth.Phase.STEADY, depth.phase());
    }

    @Test
    void aSlowClientHoldingItsPacketIsJoinedWhileEachPacketMoreMovesOverTheTarget() {
        // each packet in flight moves 30 MB/s (its client's speed) until the 100 MB/s volume is full:
        // +100 %, +50 % and a fourth's +11 % are kept, a fifth's nothing is not
        assertEquals(4, settle(d -> Math.min(100e6, 30e6 * d), 2000));
    }

    @Test
    void aDipBeforeAProbeDoesNotDeepenTheQueue() {
        Depth depth = new Depth();
        int d = depth.depth();
        for (int i = 0; i < 300; i++) {
            // a saturated volume whose throughput dips by a third on the interval before each probe
            double bps = i % Depth.PROBE_EVERY == Depth.PROBE_EVERY - 2 ? 67e6 : 100e6;
            d = depth.interval(bps, true, 2, NOBODY);
        }
        assertEquals(1, d);
    }

    @Test
    void anIntervalThatHeldNobodyLeavesTheDepthForTheNextContention() {
        // a pause in the load (a transfer's end, a writer between blocks) says nothing about the depth:
        // cut to what was in flight, CPU-bound cores would spend a second at depth 1 after each
        Depth depth = new Depth();
        int d = 1;
        for (int i = 0; i < 200; i++) {
            d = depth.interval(30e6 * Math.min(d, 3), true, 2, NOBODY);
        }
        assertEquals(3, d);
        for (int i = 0; i < 50; i++) {
            assertEquals(3, depth.interval(10e6, false, 2, NOBODY));
        }
    }

    @Test
    void aDepthDeeperThanANewLoadNeedsIsFoundByTheNextProbeDown() {
        Depth depth = new Depth();
        int d = 1;
        for (int i = 0; i < 200; i++) {
            d = depth.interval(30e6 * Math.min(d, 3), true, 2, NOBODY);
        }
        assertEquals(3, d);
        for (int i = 0; i < 2000; i++) {
            d = depth.interval(100e6, true, 2, NOBODY);   // now a disk that one packet keeps busy
        }
        assertEquals(1, d);
    }
}
