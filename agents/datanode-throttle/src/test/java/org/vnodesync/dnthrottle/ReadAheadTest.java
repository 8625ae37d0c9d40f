package org.vnodesync.dnthrottle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collections;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import net.bytebuddy.description.type.TypeDescription;
import org.apache.hadoop.io.ReadaheadPool;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A read's read-ahead through its volume's dispatcher (ReadAhead; docs/edge.md A4): real threads standing
 * in for the op's thread and the ReadaheadPool's, on a real block file (posix_fadvise is Hadoop's no-op
 * without its native library; the one-byte reads that wait for each piece are real).
 */
@Timeout(30)
class ReadAheadTest {
    static final long MIB = 1 << 20;
    static final long WAIT_NS = 10_000_000_000L;

    private Path file;
    private FileInputStream in;

    @BeforeEach
    void blockFile() throws IOException {
        file = Files.createTempFile("vnode-sync-read-ahead-test.", ".blk");
        Files.write(file, new byte[(int) MIB]);
        in = new FileInputStream(file.toFile());
    }

    @AfterEach
    void cleanUp() throws IOException {
        in.close();
        Files.deleteIfExists(file);
    }

    private static UserShare weighing(double weight) {
        UserShare share = new UserShare();
        share.weight = weight;
        return share;
    }

    private static ReadAhead op(Dispatcher volume, String user, double weight, Thread thread) {
        return new ReadAhead(volume, new Flow(new Throttles.Charge(user)), weighing(weight), thread,
                UserThrottler.SYSTEM_CLOCK, new Dispatcher("DS-1.packets"));
    }

    /** A packet of another user's that holds the volume's one slot until released. */
    private static Dispatcher.Ticket holdTheSlot(Dispatcher volume) {
        Dispatcher.Ticket packet = new Dispatcher.Ticket(new Flow(new Throttles.Charge("carol")), Direction.READ,
                Thread.currentThread());
        assertTrue(volume.ask(packet, 0, 1, false, System.nanoTime()));
        return packet;
    }

    private static Thread pool(FileDescriptor fd, long offset) {
        Thread t = new Thread(() -> assertTrue(ReadAhead.run(fd, offset, "test")), "read-ahead pool thread");
        t.start();
        return t;
    }

    private static void waitFor(BooleanSupplier condition, String what) throws InterruptedException {
        long until = System.nanoTime() + WAIT_NS;
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < until, "not within 10 s: " + what);
            Thread.sleep(1);
        }
    }

    /** Hadoop's request at OFFSET, as readaheadStream returns it: what the op's next call passes back as its last. */
    private static ReadaheadPool.ReadaheadRequest lastAt(long offset) {
        return new ReadaheadPool.ReadaheadRequest() {
            @Override
            public void cancel() {
            }

            @Override
            public long getOffset() {
                return offset;
            }

            @Override
            public long getLength() {
                return 4 * MIB;
            }
        };
    }

    @Test
    void aRequestsPiecesWaitForTheirTurnAtTheVolumeAndThePacketWaitsForItsFirstByte() throws Exception {
        Dispatcher volume = new Dispatcher("DS-1");
        Dispatcher.Ticket other = holdTheSlot(volume);
        ReadAhead alice = op(volume, "alice", 8, Thread.currentThread());
        FileDescriptor fd = in.getFD();
        alice.beforeStream(fd, 0, 4 * MIB, null);
        Thread poolThread = pool(fd, 0);
        waitFor(() -> volume.waiting() == 1, "the request's first piece waits for the slot");
        Thread packet = new Thread(() -> alice.afterStream(fd, 0, true, () -> false, () -> { }), "the op's packet");
        packet.start();
        packet.join(200);
        assertTrue(packet.isAlive(), "the packet read before its read-ahead asked the disk for its bytes");
        assertEquals(0, alice.askedTo());
        volume.release(other, 64 * 1024, System.nanoTime());
        poolThread.join(WAIT_NS / 1_000_000);
        packet.join(WAIT_NS / 1_000_000);
        assertFalse(packet.isAlive());
        assertEquals(MIB, alice.askedTo(), "the request, clipped to the block's end, was read whole");
        assertEquals(0, volume.inFlight());
        assertEquals(0, ReadAhead.made());
    }

    @Test
    void twoReadersReadAheadInPiecesByTheirWeights() throws Exception {
        Dispatcher volume = new Dispatcher("DS-1");
        Dispatcher.Ticket other = holdTheSlot(volume);
        FileDescriptor aliceFd = in.getFD();
        try (FileInputStream bobIn = new FileInputStream(file.toFile())) {
            FileDescriptor bobFd = bobIn.getFD();
            ReadAhead alice = op(volume, "alice", 4, Thread.currentThread());
            ReadAhead bob = op(volume, "bob", 1, Thread.currentThread());
            alice.beforeStream(aliceFd, 0, 4 * MIB, null);
            bob.beforeStream(bobFd, 0, 4 * MIB, null);
            Thread alicePool = pool(aliceFd, 0);
            Thread bobPool = pool(bobFd, 0);
            waitFor(() -> volume.waiting() == 2, "both requests wait for the slot");
            // Carol's packet is done and she asks for her next (tagged 64 KiB at weight 1) in the same call: once V
            // reaches that, she holds the slot and both requests stand still. By then alice's pieces at weight 4
            // went four to each of bob's at 1.
            if (!volume.ask(other, 64 * 1024, 1, false, System.nanoTime())) {
                volume.await(other, UserThrottler.SYSTEM_CLOCK, () -> false);
            }
            long alicePieces = alice.askedTo() / Dispatcher.FIRST_PACKET_BYTES;
            long bobPieces = bob.askedTo() / Dispatcher.FIRST_PACKET_BYTES;
            assertTrue(alicePieces >= 4 && alicePieces <= 6 && bobPieces >= 1 && bobPieces <= 2,
                    "alice had " + alicePieces + " pieces and bob " + bobPieces + " when their tags passed 64 KiB");
            volume.release(other, 0, System.nanoTime());
            alicePool.join(WAIT_NS / 1_000_000);
            bobPool.join(WAIT_NS / 1_000_000);
            assertEquals(MIB, alice.askedTo());
            assertEquals(MIB, bob.askedTo());
        }
    }

    @Test
    void aRequestMadeWhileTheOpsReaderIsAtWorkMovesWhereItReadsToAndItsOwnRunIsSkipped() throws Exception {
        Dispatcher volume = new Dispatcher("DS-1");
        Dispatcher.Ticket other = holdTheSlot(volume);
        ReadAhead alice = op(volume, "alice", 8, Thread.currentThread());
        FileDescriptor fd = in.getFD();
        alice.beforeStream(fd, 0, MIB / 2, null);
        Thread reader = pool(fd, 0);
        waitFor(() -> volume.waiting() == 1, "the reader's first piece waits for the slot");
        // The reader passed the halfway mark (its packets came from the cache): Hadoop submits the next request.
        alice.beforeStream(fd, MIB / 4, MIB / 2, lastAt(0));
        Thread next = pool(fd, MIB / 4);
        next.join(WAIT_NS / 1_000_000);
        assertFalse(next.isAlive());
        assertEquals(1, volume.waiting(), "a second thread read for the op");
        assertEquals(0, alice.askedTo());
        volume.release(other, 64 * 1024, System.nanoTime());
        reader.join(WAIT_NS / 1_000_000);
        assertEquals(3 * MIB / 4, alice.askedTo(), "the one reader read up to the second request's end");
        assertEquals(0, volume.inFlight());
        assertEquals(0, ReadAhead.made());
    }

    @Test
    void anOpThatEndsWhileItsPieceWaitsGivesItsTagBackAndItsReaderStops() throws Exception {
        Dispatcher volume = new Dispatcher("DS-1");
        Dispatcher.Ticket other = holdTheSlot(volume);
        Flow flow = new Flow(new Throttles.Charge("alice"));
        ReadAhead alice = new ReadAhead(volume, flow, weighing(8), Thread.currentThread(), UserThrottler.SYSTEM_CLOCK,
                new Dispatcher("DS-1.packets"));
        FileDescriptor fd = in.getFD();
        alice.beforeStream(fd, 0, 4 * MIB, null);
        Thread reader = pool(fd, 0);
        waitFor(() -> volume.waiting() == 1, "the reader's first piece waits for the slot");
        assertTrue(flow.finish > 0);
        alice.end();
        reader.join(WAIT_NS / 1_000_000);
        assertFalse(reader.isAlive());
        assertEquals(0, volume.waiting());
        assertEquals(0.0, flow.finish, "the piece that never went was charged");
        assertEquals(0, alice.askedTo());
        volume.release(other, 64 * 1024, System.nanoTime());
        assertEquals(0, volume.inFlight());
    }

    @Test
    void aRequestNotAnOpsIsLeftToHadoop() throws Exception {
        assertFalse(ReadAhead.run(in.getFD(), 0, "not an op's"));
        // ...and a call that submits nothing (before the halfway mark) makes nothing known.
        ReadAhead alice = op(new Dispatcher("DS-1"), "alice", 1, Thread.currentThread());
        alice.beforeStream(in.getFD(), MIB / 4, 4 * MIB, lastAt(0));
        assertEquals(0, ReadAhead.made());
    }

    @Test
    void aReadsPacketsTakeSlotsOfTheirOwnOnceItsReadAheadIsMade() {
        Throttles t = new Throttles(Policy.Shares.NONE, 0);
        t.apply(new Policy(1, Policy.Node.NONE, Policy.Shares.NONE,
                Maps.of("alice", new Policy.Shares(new Policy.Share(8, 0, 0), new Policy.Share(8, 0, 0))),
                Collections.emptyMap(), Collections.emptyMap()));
        Dispatcher volume = t.volume("DS-1");
        UserThrottler read = new UserThrottler(t, t.chargeFor("alice"), Direction.READ, "DS-1", null,
                UserThrottler.SYSTEM_CLOCK, UserThrottler.SYSTEM_SLEEPER);
        assertEquals(1, volume.inFlight(), "a read's first packet holds a slot before it moves");
        read.readAhead();
        assertEquals(0, volume.inFlight(), "the slot stayed with the packet once the read-ahead took the reads");
        read.throttle(64 * 1024);
        assertEquals(0, volume.inFlight(), "its next packet took no slot of the volume's");
        assertEquals(1, t.packets("DS-1").inFlight(), "...but one of the packets' own, for its copy and send");
        read.close();
        assertEquals(0, t.packets("DS-1").inFlight());
    }

    @Test
    void aPacketsWaitForItsReadAheadIsItsUsersWaitAsAWaitForItsSlotWas() throws Exception {
        Throttles t = new Throttles(Policy.Shares.NONE, 0);
        t.apply(new Policy(1, Policy.Node.NONE, Policy.Shares.NONE,
                Maps.of("alice", new Policy.Shares(new Policy.Share(8, 0, 0), new Policy.Share(8, 0, 0))),
                Collections.emptyMap(), Collections.emptyMap()));
        Dispatcher volume = t.volume("DS-1");
        UserThrottler read = new UserThrottler(t, t.chargeFor("alice"), Direction.READ, "DS-1", null,
                UserThrottler.SYSTEM_CLOCK, UserThrottler.SYSTEM_SLEEPER);
        ReadAhead readAhead = read.readAhead();
        Dispatcher.Ticket other = holdTheSlot(volume);
        FileDescriptor fd = in.getFD();
        readAhead.beforeStream(fd, 0, 4 * MIB, null);
        Thread reader = pool(fd, 0);
        waitFor(() -> volume.waiting() == 1, "the read-ahead's first piece waits for the slot");
        long before = t.chargeFor("alice").counters().readWaitNs.sum();
        Thread packet = new Thread(() -> read.awaitReadAhead(fd, 0, true), "the op's packet");
        packet.start();
        Thread.sleep(100);
        volume.release(other, 64 * 1024, System.nanoTime());
        packet.join(WAIT_NS / 1_000_000);
        reader.join(WAIT_NS / 1_000_000);
        long waited = t.chargeFor("alice").counters().readWaitNs.sum() - before;
        assertTrue(waited >= 90_000_000L, "alice's packet waited " + waited / 1e6 + " ms for its read-ahead, as counted");
        read.close();
    }

    /** A read op of USER's over BYTES of a cached block file: its read-ahead, then its packets, each sent in SEND_NS. */
    private static void readWhole(Throttles t, String user, FileDescriptor fd, long bytes, long sendNs,
                                  AtomicInteger packets, CyclicBarrier start) {
        UserThrottler read = new UserThrottler(t, t.chargeFor(user), Direction.READ, "DS-1", null,
                UserThrottler.SYSTEM_CLOCK, UserThrottler.SYSTEM_SLEEPER);
        read.readAhead().beforeStream(fd, 0, bytes, null);
        Thread reader = pool(fd, 0);
        try {
            start.await();
            for (long position = 0; position < bytes; position += Dispatcher.FIRST_PACKET_BYTES) {
                read.awaitReadAhead(fd, position, position == 0);
                // The packet's copy and send, in its slot: parked, not spun, so that the two ops' threads leave
                // the cores to the read-ahead's pool threads (spinning, four threads on two cores, an op's packet
                // now and then waited for its read-ahead with no slot, and the split was the scheduler's).
                for (long until = System.nanoTime() + sendNs, left; (left = until - System.nanoTime()) > 0; ) {
                    LockSupport.parkNanos(left);
                }
                packets.incrementAndGet();
                read.throttle(Dispatcher.FIRST_PACKET_BYTES);
            }
            read.close();
            reader.join(WAIT_NS / 1_000_000);
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    @Test
    void twoReadersFromThePageCacheSplitTheirPacketsSlotsByTheirWeights() throws Exception {
        Throttles t = new Throttles(Policy.Shares.NONE, 0);
        t.apply(new Policy(1, Policy.Node.NONE, Policy.Shares.NONE,
                Maps.of("alice", new Policy.Shares(new Policy.Share(8, 0, 0), new Policy.Share(8, 0, 0)),
                        "bob", new Policy.Shares(new Policy.Share(4, 0, 0), new Policy.Share(4, 0, 0))),
                Collections.emptyMap(), Collections.emptyMap()));
        AtomicInteger alicePackets = new AtomicInteger();
        AtomicInteger bobPackets = new AtomicInteger();
        AtomicInteger bobsWhenAliceEnded = new AtomicInteger();
        CyclicBarrier start = new CyclicBarrier(2);
        long bytes = 4 * MIB;
        Path block = Files.createTempFile("vnode-sync-read-ahead-test.", ".blk");
        try (FileInputStream aliceIn = new FileInputStream(block.toFile());
             FileInputStream bobIn = new FileInputStream(block.toFile())) {
            Files.write(block, new byte[(int) bytes]);
            FileDescriptor aliceFd = aliceIn.getFD();
            FileDescriptor bobFd = bobIn.getFD();
            Thread alice = new Thread(() -> {
                readWhole(t, "alice", aliceFd, bytes, 200_000, alicePackets, start);
                bobsWhenAliceEnded.set(bobPackets.get());
            }, "alice's op");
            Thread bob = new Thread(() -> readWhole(t, "bob", bobFd, bytes, 200_000, bobPackets, start), "bob's op");
            alice.start();
            bob.start();
            alice.join(WAIT_NS / 1_000_000);
            bob.join(WAIT_NS / 1_000_000);
        } finally {
            Files.deleteIfExists(block);
        }
        // Their pieces take microseconds at the disk, so nothing waits there: the packets' slots order them, 2 : 1
        // (alice's 64 packets to bob's 32), where with no slots of their own the cores would split them alike (bob
        // 59 of alice's 64, measured). The band is what tells the two apart, with room for a thread preempted
        // between its packets on a busy machine (the other then takes turns it would have waited for).
        assertEquals(64, alicePackets.get());
        assertTrue(bobsWhenAliceEnded.get() >= 22 && bobsWhenAliceEnded.get() <= 46,
                "bob had sent " + bobsWhenAliceEnded.get() + " packets when alice had sent her 64");
    }

    @Test
    void piecesFoundInThePageCacheTakeNoSlotAndAreNotChargedAtTheDisk() throws Exception {
        Dispatcher volume = new Dispatcher("DS-1");
        Dispatcher packets = new Dispatcher("DS-1.packets");
        // The volume's packets took 20 ms each for their copy and send (a 64 KiB packet: one sample), far more
        // than a piece from the page cache takes even on a busy machine.
        Dispatcher.Ticket packet = new Dispatcher.Ticket(new Flow(new Throttles.Charge("carol")), Direction.READ,
                Thread.currentThread());
        assertTrue(packets.ask(packet, 0, 1, false, 0));
        assertTrue(packets.ask(packet, Dispatcher.FIRST_PACKET_BYTES, 1, false, 20_000_000L));
        packets.release(packet, 0, 20_000_000L);
        // Carol moved at the volume too (alone, alice would have nobody to be ordered against).
        Dispatcher.Ticket carols = holdTheSlot(volume);
        volume.release(carols, Dispatcher.FIRST_PACKET_BYTES, System.nanoTime());
        Flow flow = new Flow(new Throttles.Charge("alice"));
        ReadAhead alice = new ReadAhead(volume, flow, weighing(8), Thread.currentThread(), UserThrottler.SYSTEM_CLOCK,
                packets);
        FileDescriptor fd = in.getFD();
        alice.beforeStream(fd, 0, MIB, null);
        pool(fd, 0).join(WAIT_NS / 1_000_000);
        assertEquals(MIB, alice.readTo(), "the request was read whole");
        // Its first piece took a slot (nothing said yet where its reads wait) and read in microseconds: the rest
        // went with no slot and no charge. Charged at the disk for all, its tag would be 16 pieces ahead.
        assertTrue(flow.finish <= 2.0 * Dispatcher.FIRST_PACKET_BYTES / 8,
                "alice was charged " + flow.finish * 8 / Dispatcher.FIRST_PACKET_BYTES + " pieces at the disk");
        assertEquals(0, volume.inFlight());
    }

    @Test
    void theHooksFindHadoopsReadAheadMethodsAndTheFieldsTheirAdviceReads() throws Exception {
        Class<?> pool = ReadaheadPool.class;
        Class<?> request = Class.forName(Hook.READ_AHEAD_RUN.className());
        assertEquals(pool.getName(), Hook.READ_AHEAD_STREAM.className());
        assertFalse(TypeDescription.ForLoadedType.of(pool).getDeclaredMethods().filter(Hook.READ_AHEAD_STREAM.matcher())
                .isEmpty());
        assertFalse(TypeDescription.ForLoadedType.of(request).getDeclaredMethods().filter(Hook.READ_AHEAD_RUN.matcher())
                .isEmpty());
        pool.getDeclaredField("pool");
        request.getDeclaredField("fd");
        request.getDeclaredField("off");
        request.getDeclaredField("identifier");
        assertEquals("ReadaheadPool.readaheadStream", Hook.READ_AHEAD_STREAM.id());
        assertEquals("ReadaheadRequestImpl.run", Hook.READ_AHEAD_RUN.id());
    }
}
