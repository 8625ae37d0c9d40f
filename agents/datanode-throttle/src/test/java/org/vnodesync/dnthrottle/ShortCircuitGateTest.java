package org.vnodesync.dnthrottle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import org.apache.hadoop.hdfs.ExtendedBlockId;
import org.junit.jupiter.api.Test;

class ShortCircuitGateTest {
    private static final long BLOCK = 128L << 20;

    private static Throttles throttles(Policy.Shares alice) {
        Throttles t = new Throttles(Policy.Shares.NONE, 0);
        Policy.Shares weighted = new Policy.Shares(new Policy.Share(8, 0, 0), new Policy.Share(8, 0, 0));
        t.apply(new Policy(1, new Policy.Node(100_000_000, 100_000_000, Collections.emptyList()), Policy.Shares.NONE,
                Maps.of("alice", alice, "bob", weighted), Collections.emptyMap(), Collections.emptyMap()));
        return t;
    }

    @Test
    void aUserAloneWithNoCeilingReadsShortCircuitAndItsGrantRunsOutAfterTheBlocksTime() {
        Throttles t = throttles(new Policy.Shares(new Policy.Share(4, 0, 0), new Policy.Share(4, 0, 0)));
        ShortCircuitGate gate = new ShortCircuitGate();
        ExtendedBlockId block = new ExtendedBlockId(7, "BP-1");
        assertNull(gate.refusal(t, "alice", block, BLOCK, 0));
        assertNull(gate.refusal(t, "alice", block, BLOCK, 1));  // its own grant does not hold it back
        String bob = gate.refusal(t, "bob", null, BLOCK, 2);
        assertNotNull(bob);
        assertTrue(bob.contains("alice reads short-circuit"), bob);
        // 128 MiB at 100 MB/s (configured; no volume moved yet): alice's grant runs out 1.34 s after it was made, and is revoked.
        List<ExtendedBlockId> revoked = new java.util.ArrayList<>();
        assertTrue(gate.sweep(1_300_000_000L, revoked::add));
        assertEquals(Collections.emptyList(), revoked);
        assertFalse(gate.sweep(1_400_000_000L, revoked::add));
        assertEquals(Arrays.asList(block), revoked);
        assertNull(gate.refusal(t, "bob", null, BLOCK, 1_400_000_000L));
    }

    @Test
    void aUserWithACeilingIsRefusedWhateverElseHappens() {
        Throttles t = throttles(new Policy.Shares(new Policy.Share(4, 0, 20_000_000), Policy.Share.NONE));
        String why = new ShortCircuitGate().refusal(t, "alice", null, BLOCK, 0);
        assertNotNull(why);
        assertTrue(why.contains("ceiling"), why);
    }

    @Test
    void aUserIsRefusedWhileAnotherHasAPacketAtAVolume() {
        Throttles t = throttles(new Policy.Shares(new Policy.Share(4, 0, 0), new Policy.Share(4, 0, 0)));
        Dispatcher volume = t.volume("DS-1");
        Dispatcher.Ticket bob = new Dispatcher.Ticket(t.flow(volume, t.chargeFor("bob")), Direction.READ,
                Thread.currentThread());
        assertTrue(volume.ask(bob, 0, 4, false, 0));
        String why = new ShortCircuitGate().refusal(t, "alice", null, BLOCK, 0);
        assertNotNull(why);
        assertTrue(why.contains("other users read through"), why);
        volume.release(bob, 64 << 10, 1);
        assertNull(new ShortCircuitGate().refusal(t, "alice", null, BLOCK, 0));
    }

    @Test
    void anotherUsersReadThroughTheDataNodeRefusesAndRevokesTheGrants() {
        Throttles t = throttles(new Policy.Shares(new Policy.Share(4, 0, 0), new Policy.Share(4, 0, 0)));
        ShortCircuitGate gate = new ShortCircuitGate();
        ExtendedBlockId block = new ExtendedBlockId(7, "BP-1");
        assertNull(gate.refusal(t, "alice", block, BLOCK, 0));
        List<ExtendedBlockId> revoked = new java.util.ArrayList<>();
        gate.readStarted("bob", revoked::add);
        assertEquals(Arrays.asList(block), revoked);
        String why = gate.refusal(t, "alice", null, BLOCK, 10_000_000_000L);
        assertNotNull(why);
        assertTrue(why.contains("bob reads through"), why);
        gate.readEnded("bob", 10_000_000_000L);
        assertNotNull(gate.refusal(t, "alice", null, BLOCK, 11_000_000_000L));  // bob has just read
        assertNull(gate.refusal(t, "alice", null, BLOCK, 12_500_000_000L));
        gate.readStarted("alice", revoked::add);  // one's own read revokes nothing of its own
        assertEquals(1, revoked.size());
    }
}
