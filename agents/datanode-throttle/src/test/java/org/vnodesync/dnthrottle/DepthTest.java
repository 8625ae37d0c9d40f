package org.vnodesync.dnthrottle;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.function.IntToDoubleFunction;
import org.junit.jupiter.api.Test;

/** The depth against throughput curves of known shape: Depth.interval's whole contract. */
class DepthTest {
    /** The depth after INTERVALS binding intervals on a volume that moves CURVE(depth) bytes/s. */
    private static int settle(IntToDoubleFunction curve, int intervals) {
        return settle(curve, intervals, 2);
    }

    /** The same with SHARERS users moving at the volume. */
    private static int settle(IntToDoubleFunction curve, int intervals, int sharers) {
        Depth depth = new Depth();
        int d = depth.depth();
        for (int i = 0; i < intervals; i++) {
            d = depth.interval(curve.applyAsDouble(d), true, sharers);
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
    void aDiskThatGainsLittleFromDepthIsNotDeepened() {
        // +20 % from a second request is under the halfway mark (+50 %) of an unsaturated resource.
        assertEquals(1, settle(d -> 100e6 * Math.min(1.6, 1 + 0.2 * (d - 1)), 2000));
    }

    @Test
    void anIntervalWithOneUserSaysNothingAboutTheDepth() {
        // nobody to order there (the dispatcher bounds nothing): the depth waits for users who share,
        // probes included, whatever the lone user keeps in flight or moves
        Depth depth = new Depth();
        int d = depth.depth();
        for (int i = 0; i < 100; i++) {
            d = depth.interval(30e6 * Math.min(d, 3), true, 2);
        }
        assertEquals(3, d);
        for (int i = 0; i < 2000; i++) {
            assertEquals(3, depth.interval(i % 2 == 0 ? 10e6 : 300e6, i % 3 != 0, 1));
        }
        assertEquals(Depth.Phase.STEADY, depth.phase());
    }

    @Test
    void aSlowClientHoldingItsPacketIsJoinedWhileEachPacketMoreMovesOverHalfItsShare() {
        // each packet in flight moves 30 MB/s (its client's speed) until the 100 MB/s volume is full:
        // +100 % and +50 % are kept, a fourth's +11 % is under 1/(2 x 3)
        assertEquals(3, settle(d -> Math.min(100e6, 30e6 * d), 2000));
    }

    @Test
    void aDipBeforeAProbeDoesNotDeepenTheQueue() {
        Depth depth = new Depth();
        int d = depth.depth();
        for (int i = 0; i < 300; i++) {
            // a saturated volume whose throughput dips by a third on the interval before each probe
            double bps = i % Depth.PROBE_EVERY == Depth.PROBE_EVERY - 2 ? 67e6 : 100e6;
            d = depth.interval(bps, true, 2);
        }
        assertEquals(1, d);
    }

    @Test
    void anIntervalThatHeldNobodyLeavesTheDepthForTheNextContention() {
        // a pause in the load (a transfer's end, a writer between blocks) says nothing about the depth:
        // cut to what was in flight, CPU-bound cores would spend a second or more at depth 1 after each
        Depth depth = settledAtThree();
        for (int i = 0; i < 50; i++) {
            assertEquals(3, depth.interval(10e6, false, 2));
        }
    }

    @Test
    void aDepthDeeperThanANewLoadNeedsIsFoundByTheNextProbeDown() {
        Depth depth = settledAtThree();
        int d = 3;
        for (int i = 0; i < 2000; i++) {
            d = depth.interval(100e6, true, 2);   // now a disk that one packet keeps busy
        }
        assertEquals(1, d);
    }

    /** A volume whose throughput grows with the depth up to 3 packets (30 MB/s each), probed until it settles there. */
    private static Depth settledAtThree() {
        Depth depth = new Depth();
        int d = 1;
        for (int i = 0; i < 200; i++) {
            d = depth.interval(30e6 * Math.min(d, 3), true, 2);
        }
        assertEquals(3, d);
        return depth;
    }
}
