package org.vnodesync.dnthrottle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The edge's guarantees (docs/edge.md), each on a SimulatedNode whose resources share themselves as a
 * fair kernel does, against the same node with no vnode-sync (NONE) or static caps (STATIC) where the
 * guarantee is relative to them.
 */
class DispatcherTest {
    static final double MB = 1e6;
    static final long MIB = 1 << 20;

    private static SimulatedNode node(SimulatedNode.Sharing sharing) {
        return new SimulatedNode(sharing, 2);
    }

    private static void near(double expected, double actual, double tolerance, String what) {
        assertTrue(Math.abs(actual - expected) <= tolerance * expected,
                what + ": " + actual / MB + " MB/s, not " + expected / MB + " within " + tolerance * 100 + " %");
    }

    @Test
    void twoUsersWithOneThreadEachShareADiskByWeightAtItsFullSpeed() {
        SimulatedNode n = node(SimulatedNode.Sharing.WEIGHTS);
        SimulatedNode.Volume disk = n.volume("DS-1", 100 * MB);
        n.weight("alice", 8);
        n.weight("bob", 4);
        n.backlogged("alice", Direction.READ, disk);
        n.backlogged("bob", Direction.READ, disk);
        n.runFor(2 * SimulatedNode.SECOND);
        Map<String, Double> r = n.rates(10);
        near(2 * 100 * MB / 3, r.get("alice"), 0.1, "alice");
        near(100 * MB / 3, r.get("bob"), 0.1, "bob");
        near(100 * MB, r.get("alice") + r.get("bob"), 0.05, "the disk");
    }

    @Test
    void readsAndWritesShareOneVolumesQueueByWeight() {
        SimulatedNode n = node(SimulatedNode.Sharing.WEIGHTS);
        SimulatedNode.Volume disk = n.volume("DS-1", 60 * MB);
        n.weight("alice", 1);
        n.weight("bob", 9);
        n.backlogged("alice", Direction.WRITE, disk);
        n.backlogged("alice", Direction.WRITE, disk);
        n.backlogged("bob", Direction.READ, disk);
        // after 10 s: the depth's first probes (a few intervals at depth 2, each sooner than the
        // next as they find nothing) are paid for in the weights while they last
        n.runFor(10 * SimulatedNode.SECOND);
        Map<String, Double> r = n.rates(30);
        near(6 * MB, r.get("alice"), 0.1, "alice writing");
        near(54 * MB, r.get("bob"), 0.1, "bob reading");
    }

    @Test
    void manyUsersOfFarApartWeightsGetTheirShares() {
        SimulatedNode n = node(SimulatedNode.Sharing.WEIGHTS);
        SimulatedNode.Volume disk = n.volume("DS-1", 120 * MB);
        double[] weights = {1, 2, 9, 16, 3, 1};
        double sum = 0;
        for (int i = 0; i < weights.length; i++) {
            n.weight("u" + i, weights[i]);
            sum += weights[i];
            for (int t = 0; t <= i % 3; t++) {
                n.backlogged("u" + i, i % 2 == 0 ? Direction.READ : Direction.WRITE, disk);
            }
        }
        n.runFor(2 * SimulatedNode.SECOND);
        Map<String, Double> r = n.rates(20);
        for (int i = 0; i < weights.length; i++) {
            near(120 * MB * weights[i] / sum, r.get("u" + i), 0.1, "u" + i + " at weight " + weights[i]);
        }
    }

    @Test
    void onCpuBoundCoresAUserWithOneThreadTakesACoreAndTheRestGoesToTheOthers() {
        // Each thread encrypts at 30 MB/s on its core; two cores; the disk is far faster.
        double perCore = 30 * MB;
        for (int threadsEach : new int[] {1, 3}) {
            double[] total = new double[2];
            Map<String, Double> split = null;
            for (SimulatedNode.Sharing sharing : new SimulatedNode.Sharing[] {SimulatedNode.Sharing.NONE,
                SimulatedNode.Sharing.WEIGHTS}) {
                SimulatedNode n = node(sharing);
                SimulatedNode.Volume disk = n.volume("DS-1", 1000 * MB);
                n.weight("alice", 8);
                n.weight("bob", 4);
                for (int t = 0; t < threadsEach; t++) {
                    n.backlogged("alice", Direction.READ, disk).cpuPerByte = 1 / perCore;
                    n.backlogged("bob", Direction.READ, disk).cpuPerByte = 1 / perCore;
                }
                n.runFor(5 * SimulatedNode.SECOND);
                Map<String, Double> r = n.rates(20);
                total[sharing.ordinal() == 0 ? 0 : 1] = r.get("alice") + r.get("bob");
                split = r;
            }
            assertTrue(total[1] >= 0.95 * total[0], threadsEach + " threads each: the node moved " + total[1] / MB
                    + " MB/s under weights against " + total[0] / MB + " with no vnode-sync");
            if (threadsEach == 1) {
                // Max-min: alice's share (2/3 of two cores) is more than her one thread can use.
                near(perCore, split.get("alice"), 0.1, "alice, one thread");
                near(perCore, split.get("bob"), 0.1, "bob, one thread");
            } else {
                near(2 * 2 * perCore / 3, split.get("alice"), 0.1, "alice, three threads");
                near(2 * perCore / 3, split.get("bob"), 0.1, "bob, three threads");
            }
        }
    }

    @Test
    void eachVolumeIsSharedOnItsOwnAtItsOwnSpeed() {
        SimulatedNode n = node(SimulatedNode.Sharing.WEIGHTS);
        SimulatedNode.Volume fast = n.volume("DS-fast", 150 * MB);
        SimulatedNode.Volume slow = n.volume("DS-slow", 30 * MB);
        n.weight("alice", 4);
        n.weight("bob", 1);
        n.backlogged("alice", Direction.READ, fast);
        n.backlogged("bob", Direction.READ, fast);
        n.backlogged("bob", Direction.READ, slow);
        n.runFor(2 * SimulatedNode.SECOND);
        Map<String, Double> r = n.rates(10);
        near(120 * MB, r.get("alice"), 0.1, "alice on the fast volume");
        near(30 * MB + 30 * MB, r.get("bob"), 0.1, "bob: his share of the fast one and all of the slow one");
    }

    @Test
    void aUserAloneHasTheWholeVolume() {
        SimulatedNode n = node(SimulatedNode.Sharing.WEIGHTS);
        SimulatedNode.Volume disk = n.volume("DS-1", 200 * MB);
        n.weight("alice", 1);
        n.weight("bob", 16);
        n.backlogged("alice", Direction.READ, disk);
        n.runFor(SimulatedNode.SECOND);
        near(200 * MB, n.rates(5).get("alice"), 0.05, "alice alone");
    }

    @Test
    void aSlowClientHoldingASlotDeepensTheQueueSoTheVolumeDoesNotIdle() {
        SimulatedNode n = node(SimulatedNode.Sharing.WEIGHTS);
        SimulatedNode.Volume disk = n.volume("DS-1", 100 * MB);
        n.weight("alice", 8);
        n.weight("bob", 1);
        n.add(new SimulatedNode.Worker("alice", Direction.READ, disk, 2 * MB, 0, 0, n.now()));
        n.backlogged("bob", Direction.READ, disk);
        n.runFor(5 * SimulatedNode.SECOND);
        Map<String, Double> r = n.rates(10);
        near(2 * MB, r.get("alice"), 0.1, "alice, held by her client");
        near(98 * MB, r.get("bob"), 0.05, "bob, what she leaves");
    }

    @Test
    void aFloorHoldsAgainstAHeavierWeight() {
        SimulatedNode n = node(SimulatedNode.Sharing.WEIGHTS);
        SimulatedNode.Volume disk = n.volume("DS-1", 100 * MB);
        n.weight("alice", 1);
        n.weight("bob", 16);
        n.floor("alice", 40_000_000L);
        n.backlogged("alice", Direction.READ, disk);
        n.backlogged("bob", Direction.READ, disk);
        n.runFor(2 * SimulatedNode.SECOND);
        Map<String, Double> r = n.rates(10);
        assertTrue(r.get("alice") >= 40 * MB * 0.97, "alice " + r.get("alice") / MB + " MB/s under her 40 MB/s floor");
        near(100 * MB, r.get("alice") + r.get("bob"), 0.05, "the disk");
    }

    /** A returning reader's transfers (ms), p50 and p99, beside two bulk readers, under SHARING. */
    private static double[] returningReader(SimulatedNode.Sharing sharing, double diskBps, double configuredBps) {
        SimulatedNode n = node(sharing);
        n.configured(configuredBps);
        SimulatedNode.Volume disk = n.volume("DS-1", diskBps);
        n.weight("alice", 8);
        n.weight("bob", 2);
        n.weight("carol", 4);
        SimulatedNode.Worker alice = n.add(new SimulatedNode.Worker("alice", Direction.READ, disk,
                Double.POSITIVE_INFINITY, 4 * MIB, 700 * SimulatedNode.MS, n.now()));
        n.backlogged("bob", Direction.READ, disk);
        n.backlogged("carol", Direction.READ, disk);
        n.runFor(60 * SimulatedNode.SECOND);
        List<Double> ms = new ArrayList<>();
        for (long[] t : alice.transfers.subList(2, alice.transfers.size())) {
            ms.add((t[1] - t[0]) / 1e6);
        }
        Collections.sort(ms);
        return new double[] {ms.get(ms.size() / 2), ms.get((int) Math.floor(0.99 * (ms.size() - 1)))};
    }

    @Test
    void aReturningReaderIsServedAsFastAsUnderStaticCapsWhateverTheDisksRealSpeed() {
        for (double diskMb : new double[] {60, 280, 15}) {
            double[] fixed = returningReader(SimulatedNode.Sharing.STATIC, diskMb * MB, 60 * MB);
            double[] weights = returningReader(SimulatedNode.Sharing.WEIGHTS, diskMb * MB, 60 * MB);
            assertTrue(weights[0] <= 1.2 * fixed[0] && weights[1] <= 1.2 * fixed[1],
                    "disk " + diskMb + " MB/s configured 60: p50/p99 " + weights[0] + "/" + weights[1]
                    + " ms under weights against " + fixed[0] + "/" + fixed[1] + " under static caps");
        }
    }

    /**
     * The same with a DataNode's read-ahead (4 MiB, as with Hadoop's native library) and a 240 MB/s send a
     * packet, as on the testbed; READ_AHEAD: how the read-ahead reaches the disk. Returns p50, p99 (ms).
     */
    private static double[] returningReaderReadAhead(SimulatedNode.Sharing sharing, SimulatedNode.ReadAhead readAhead,
                                                     double diskBps) {
        SimulatedNode n = node(sharing);
        n.readAhead(4 * MIB, readAhead, 0);
        n.configured(60 * MB);
        SimulatedNode.Volume disk = n.volume("DS-1", diskBps);
        n.weight("alice", 8);
        n.weight("bob", 2);
        n.weight("carol", 4);
        SimulatedNode.Worker alice = n.add(new SimulatedNode.Worker("alice", Direction.READ, disk,
                Double.POSITIVE_INFINITY, 4 * MIB, 700 * SimulatedNode.MS, n.now()));
        alice.netBps = 240 * MB;
        n.backlogged("bob", Direction.READ, disk).netBps = 240 * MB;
        n.backlogged("carol", Direction.READ, disk).netBps = 240 * MB;
        n.runFor(60 * SimulatedNode.SECOND);
        List<Double> ms = new ArrayList<>();
        for (long[] t : alice.transfers.subList(2, alice.transfers.size())) {
            ms.add((t[1] - t[0]) / 1e6);
        }
        Collections.sort(ms);
        return new double[] {ms.get(ms.size() / 2), ms.get((int) Math.floor(0.99 * (ms.size() - 1)))};
    }

    @Test
    void aReturningReaderIsServedAsFastAsUnderStaticCapsWhenTheBulkReadersReadAheadThroughTheDispatcher() {
        double[] ordered = null;
        for (double diskMb : new double[] {60, 280, 15}) {
            double[] fixed = returningReaderReadAhead(SimulatedNode.Sharing.STATIC, SimulatedNode.ReadAhead.DISPATCHED,
                    diskMb * MB);
            double[] weights = returningReaderReadAhead(SimulatedNode.Sharing.WEIGHTS,
                    SimulatedNode.ReadAhead.DISPATCHED, diskMb * MB);
            assertTrue(weights[0] <= 1.2 * fixed[0] && weights[1] <= 1.2 * fixed[1],
                    "disk " + diskMb + " MB/s configured 60: p50/p99 " + weights[0] + "/" + weights[1]
                    + " ms under weights against " + fixed[0] + "/" + fixed[1] + " under static caps");
            ordered = ordered == null ? weights : ordered;
        }
        // The read-ahead the dispatcher does not order (A4 before ReadAhead) is what a returning reader waits behind.
        double[] unordered = returningReaderReadAhead(SimulatedNode.Sharing.WEIGHTS, SimulatedNode.ReadAhead.REQUESTS,
                60 * MB);
        assertTrue(unordered[1] > ordered[1], "unordered read-ahead: p99 " + unordered[1] + " against " + ordered[1]
                + " ordered");
    }

    @Test
    void twoUsersWithOneReaderEachShareADiskTheyReadAheadOnByWeightAtItsFullSpeed() {
        SimulatedNode n = node(SimulatedNode.Sharing.WEIGHTS);
        n.readAhead(4 * MIB, SimulatedNode.ReadAhead.DISPATCHED, 0);
        SimulatedNode.Volume disk = n.volume("DS-1", 60 * MB);
        n.weight("alice", 8);
        n.weight("bob", 4);
        n.backlogged("alice", Direction.READ, disk).netBps = 240 * MB;
        n.backlogged("bob", Direction.READ, disk).netBps = 240 * MB;
        n.runFor(5 * SimulatedNode.SECOND);
        Map<String, Double> r = n.rates(20);
        near(40 * MB, r.get("alice"), 0.1, "alice");
        near(20 * MB, r.get("bob"), 0.1, "bob");
        near(60 * MB, r.get("alice") + r.get("bob"), 0.05, "the disk");
    }

    @Test
    void theDepthSettlesAtOneOnADiskAndAtTheCoresOnCpuBoundThreads() {
        SimulatedNode disk = node(SimulatedNode.Sharing.WEIGHTS);
        SimulatedNode.Volume d = disk.volume("DS-1", 100 * MB);
        for (String user : new String[] {"alice", "bob"}) {
            disk.weight(user, 1);
            for (int t = 0; t < 2; t++) {
                disk.backlogged(user, Direction.READ, d);
            }
        }
        disk.runFor(10 * SimulatedNode.SECOND);
        assertEquals(1, disk.throttles.volume("DS-1").depth());

        SimulatedNode cpu = node(SimulatedNode.Sharing.WEIGHTS);
        SimulatedNode.Volume c = cpu.volume("DS-1", 1000 * MB);
        for (String user : new String[] {"alice", "bob"}) {
            cpu.weight(user, 1);
            for (int t = 0; t < 2; t++) {
                cpu.backlogged(user, Direction.READ, c).cpuPerByte = 1 / (30 * MB);
            }
        }
        cpu.runFor(10 * SimulatedNode.SECOND);
        int depth = cpu.throttles.volume("DS-1").depth();
        assertTrue(depth == 2 || depth == 3, "depth " + depth + " on two CPU-bound cores");
    }

    @Test
    void aUserAloneDrivesAnElevatorDiskAsDeepAsWithoutVnodeSync() {
        // an HDD-like volume: each request more in its queue gains 20 %, up to 1.6x at depth 4
        double[] rates = new double[2];
        SimulatedNode.Sharing[] sharings = {SimulatedNode.Sharing.NONE, SimulatedNode.Sharing.WEIGHTS};
        for (int i = 0; i < 2; i++) {
            SimulatedNode n = node(sharings[i]);
            SimulatedNode.Volume disk = n.volume("DS-1", 60 * MB, q -> Math.min(1.6, 1 + 0.2 * (q - 1)));
            n.weight("alice", 1);
            for (int t = 0; t < 4; t++) {
                n.backlogged("alice", Direction.READ, disk);
            }
            n.runFor(5 * SimulatedNode.SECOND);
            rates[i] = n.rates(10).get("alice");
        }
        near(rates[0], rates[1], 0.05, "alice alone with four readers, against no vnode-sync");
    }

    /** Alice (8) and bob (4) write with one thread each; each thread takes THINK ns between packets. */
    private static double writersSplit(long thinkNs) {
        Throttles t = new Throttles(Policy.Shares.NONE, 0);
        java.util.Map<String, Policy.Shares> users = new java.util.HashMap<>();
        users.put("alice", new Policy.Shares(Policy.Share.NONE, new Policy.Share(8, 0, 0)));
        users.put("bob", new Policy.Shares(Policy.Share.NONE, new Policy.Share(4, 0, 0)));
        t.apply(new Policy(1, Policy.Node.NONE, Policy.Shares.NONE, users, new java.util.HashMap<>(),
                new java.util.HashMap<>()));
        Dispatcher volume = t.volume("DS-1");
        Dispatcher.Ticket alice = new Dispatcher.Ticket(t.flow(volume, t.chargeFor("alice")), Direction.WRITE, null);
        Dispatcher.Ticket bob = new Dispatcher.Ticket(t.flow(volume, t.chargeFor("bob")), Direction.WRITE, null);
        long serviceNs = 1_000_000;   // a packet in its slot (the kernel pausing a writer)
        long now = 0;
        long[] moved = new long[2];
        long[] readyAt = {0, 0};      // when each thread has its next packet from the network
        Dispatcher.Ticket[] tickets = {alice, bob};
        double[] weights = {8, 4};
        boolean[] asked = new boolean[2];
        Dispatcher.Ticket inSlot = null;
        long slotEnd = 0;
        while (now < 2_000_000_000L) {
            for (int i = 0; i < 2; i++) {
                if (!asked[i] && readyAt[i] <= now) {
                    asked[i] = true;
                    volume.ask(tickets[i], 0, weights[i], false, now);
                }
            }
            volume.poll(now);
            if (inSlot == null) {
                for (int i = 0; i < 2; i++) {
                    if (asked[i] && tickets[i].go && tickets[i].inFlight) {
                        inSlot = tickets[i];
                        slotEnd = now + serviceNs;
                    }
                }
            }
            if (inSlot != null && now >= slotEnd) {
                int i = inSlot == alice ? 0 : 1;
                moved[i] += 64 * 1024;
                volume.release(inSlot, 64 * 1024, now, true);
                asked[i] = false;
                readyAt[i] = now + thinkNs;
                inSlot = null;
                continue;
            }
            now += 10_000;
        }
        return (double) moved[0] / moved[1];
    }

    @Test
    void aWritersSlotWaitsForItsNextPacketSoOneThreadAUserStillSharesByWeight() {
        double split = writersSplit(100_000);   // 0.1 ms for the next packet from the network
        assertTrue(Math.abs(split - 2) <= 0.2, "alice/bob " + split + " with one writer thread each, not 2");
    }

    @Test
    void aThreadThatThinksLongerThanAPacketIsNotWaitedFor() {
        // 5 ms between packets against 1 ms in the slot: the volume serves whoever is there (work conservation).
        double split = writersSplit(5_000_000);
        assertTrue(Math.abs(split - 1) <= 0.1, "alice/bob " + split + ", not 1: the volume idled for a slow thread");
    }

    @Test
    void aReadAheadPieceIsASliceOfTheVolumeWhileItsUserIsAloneAndAPacketWhileOthersMoveThere() {
        Dispatcher volume = new Dispatcher("DS-1");
        Flow alice = new Flow(new Throttles.Charge("alice"));
        assertEquals(Dispatcher.FIRST_PACKET_BYTES, volume.pieceBytes(alice, 4 * MIB), "nothing read yet: a packet's worth");
        assertEquals(1000, volume.pieceBytes(alice, 1000), "never more than is left");
        Dispatcher.Ticket piece = Dispatcher.Ticket.piece(alice, null);
        long now = 0;
        for (int i = 0; i < 64; i++) {
            assertTrue(volume.ask(piece, i == 0 ? 0 : MIB, MIB, 1, false, now));
            now += 500_000;   // 1 MiB in its slot for 0.5 ms: 2 GiB/s
        }
        volume.release(piece, MIB, now);
        long slice = 4 * MIB * Dispatcher.SLICE_NS / 2_000_000;   // what 2 GiB/s moves in a slice: whole packets
        assertEquals(slice, volume.pieceBytes(alice, 64 * MIB), "alone: a slice of the volume");
        Dispatcher.Ticket bob = new Dispatcher.Ticket(new Flow(new Throttles.Charge("bob")), Direction.READ, null);
        assertTrue(volume.ask(bob, 0, 1, false, now));
        assertEquals(Dispatcher.FIRST_PACKET_BYTES, volume.pieceBytes(alice, 64 * MIB), "bob moves here too");
    }

    @Test
    void aSecondPieceOnlyTakesASlotNobodyWaitsForUnlessItsUserIsAlone() {
        Dispatcher volume = new Dispatcher("DS-1");   // depth 1
        Flow alice = new Flow(new Throttles.Charge("alice"));
        Dispatcher.Ticket first = Dispatcher.Ticket.piece(alice, null);
        Dispatcher.Ticket second = Dispatcher.Ticket.piece(alice, null);
        assertTrue(volume.ask(first, 0, MIB, 1, false, 0));
        assertTrue(volume.offer(second, 0, MIB, 1, 0), "alone at the volume: no depth bounds it");
        assertEquals(2, volume.inFlight());
        volume.release(second, MIB, 1);
        Dispatcher.Ticket bob = new Dispatcher.Ticket(new Flow(new Throttles.Charge("bob")), Direction.READ, null);
        assertFalse(volume.ask(bob, 0, 1, false, 2), "bob waits for the one slot");
        double tagged = alice.finish;
        assertFalse(volume.offer(second, 0, MIB, 1, 3), "bob waits: no free slot for a second piece");
        assertEquals(tagged, alice.finish, "a piece not dispatched is not tagged");
        assertEquals(1, volume.inFlight());
        assertEquals(1, volume.waiting());
        volume.release(first, MIB, 4);
        assertEquals(1, volume.inFlight(), "bob's packet went");
        assertEquals(0, volume.waiting());
    }

    /**
     * Alice (8) and bob (4) read on a fast volume at depth 1 (0.1 ms a packet), each asking for its next
     * packet as its last ends; the volume's interval ticks every 100 ms as the DataNode's loop does.
     */
    @Test
    void aReaderKeepsItsSlotForASliceSoSlotsChangeHandsRarelyAndAReturningUserStillGoesNext() {
        Throttles t = new Throttles(Policy.Shares.NONE, 0);
        java.util.Map<String, Policy.Shares> users = new java.util.HashMap<>();
        for (String[] u : new String[][] {{"alice", "8"}, {"bob", "4"}, {"carol", "4"}}) {
            users.put(u[0], new Policy.Shares(new Policy.Share(Double.parseDouble(u[1]), 0, 0), Policy.Share.NONE));
        }
        t.apply(new Policy(1, Policy.Node.NONE, Policy.Shares.NONE, users, new java.util.HashMap<>(),
                new java.util.HashMap<>()));
        Dispatcher volume = t.volume("DS-1");
        Dispatcher.Ticket[] tickets = {
            new Dispatcher.Ticket(t.flow(volume, t.chargeFor("alice")), Direction.READ, null),
            new Dispatcher.Ticket(t.flow(volume, t.chargeFor("bob")), Direction.READ, null)};
        double[] weights = {8, 4};
        long packet = 64 * 1024;
        long packetNs = 100_000;
        long now = 0;
        volume.tick(now);
        volume.ask(tickets[0], 0, 8, false, now);
        volume.ask(tickets[1], 0, 4, false, now);
        long[] moved = {0, 0};
        int handoffs = 0;
        int packets = 0;
        Dispatcher.Ticket last = null;
        while (now < 2_000_000_000L) {
            now += packetNs;
            int i = tickets[0].inFlight ? 0 : 1;
            if (last != null && tickets[i] != last) {
                handoffs++;
            }
            last = tickets[i];
            moved[i] += packet;
            packets++;
            volume.ask(tickets[i], packet, weights[i], false, now);
            if (now % 100_000_000L == 0) {
                volume.tick(now);
            }
        }
        assertEquals(1, volume.depth(), "the volume stayed at depth 1");
        double split = (double) moved[0] / moved[1];
        assertTrue(Math.abs(split - 2) <= 0.1, "alice/bob " + split + ", not 2");
        // Without slices two of three packets would change hands (alice, alice, bob, ...); a slice is
        // 2 ms, 20 packets here.
        assertTrue(handoffs <= packets / 10, handoffs + " handoffs in " + packets + " packets");

        // Carol comes back from idle: her first packet waits only for the packet in the slot, not its slice.
        Dispatcher.Ticket carol = new Dispatcher.Ticket(t.flow(volume, t.chargeFor("carol")), Direction.READ, null);
        assertTrue(!volume.ask(carol, 0, 4, false, now), "carol waits: the slot is held");
        int i = tickets[0].inFlight ? 0 : 1;
        now += packetNs;
        assertTrue(!volume.ask(tickets[i], packet, weights[i], false, now), "the holder kept the slot from carol");
        assertTrue(carol.go && carol.inFlight, "carol not dispatched at the next packet");
    }
}
