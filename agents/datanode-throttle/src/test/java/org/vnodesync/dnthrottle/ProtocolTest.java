package org.vnodesync.dnthrottle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import org.junit.jupiter.api.Test;

class ProtocolTest {
    private final Throttles throttles = new Throttles(Policy.Shares.NONE, 1234);
    private final HookReport hooks = new HookReport();

    private String talk(String input) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        new Protocol(throttles, new Protocol.Environment(hooks, () -> "3.4.2", null))
                .serve(new ByteArrayInputStream(input.getBytes(StandardCharsets.UTF_8)), out);
        return new String(out.toByteArray(), StandardCharsets.UTF_8);
    }

    @Test
    void pingNamesTheAgent() throws Exception {
        assertEquals("OK vnode-sync-datanode-throttle " + Protocol.VERSION + " started=1234\n", talk("PING\n"));
    }

    @Test
    void theVersionIsTheJarManifestsAndUnknownWhereThereIsNone() {
        // Run from target/classes there is no manifest; tests/datanode_throttle/test_agent_jar.py checks the jar's.
        assertEquals("unknown", Protocol.version(null));
        assertEquals("unknown", Protocol.version(Protocol.class.getPackage()));
        assertEquals("unknown", Protocol.VERSION);
    }

    @Test
    void helloNamesProtocolHadoopAndEveryHook() throws Exception {
        hooks.set("BlockSender.sendBlock", HookReport.SKIPPED);
        hooks.set("DataXceiver.readBlock", HookReport.WOVEN);
        assertEquals("OK protocol=2 min_protocol=2 agent=vnode-sync-datanode-throttle version=" + Protocol.VERSION
                + " hadoop=3.4.2 started_ms=1234 scheduler=weighted hook.BlockSender.sendBlock=skipped"
                + " hook.DataXceiver.readBlock=woven\n", talk("HELLO protocol=2 client=vnode-sync/0.1.0\n"));
    }

    @Test
    void helloRefusesAProtocolItDoesNotSpeakInOneLine() throws Exception {
        assertEquals("ERR protocol 3 is not spoken here: this agent (" + Protocol.VERSION + ") speaks 2..2\n",
                talk("HELLO protocol=3\n"));
    }

    @Test
    void applyReplacesTheWholeSet() throws Exception {
        assertEquals("OK generation=3\n", talk("APPLY generation=3\nNODE read_capacity_bps=60000000\n"
                + "DEFAULT read_ceiling_bps=10 write_ceiling_bps=20\nUSER name=alice read_weight=8 write_weight=8\n"
                + "USER name=bob read_weight=4\nEND\n"));
        assertEquals(60_000_000, throttles.scheduler(Direction.READ).rate());
        assertEquals("OK generation=4\n", talk("APPLY generation=4\nUSER name=bob read_ceiling_bps=5\nEND\n"));
        Policy p = throttles.policy();
        assertEquals(4, p.generation());
        assertEquals(Policy.Shares.NONE, p.defaults());
        assertEquals(1, p.users().size());
        assertEquals(5, throttles.chargeFor("bob").read().ceiling.rate());
        assertEquals(0, throttles.scheduler(Direction.READ).rate(), "no NODE line: no capacity, weights off");
        assertSame(throttles.chargeFor(null), throttles.chargeFor("alice"), "alice left: DEFAULT for new ops");
    }

    @Test
    void aBadLineChangesNothingAndTheConversationGoesOn() throws Exception {
        talk("APPLY generation=1\nUSER name=alice read_ceiling_bps=100\nEND\n");
        Policy before = throttles.policy();
        String reply = talk("APPLY generation=2\nUSER name=bob\nUSER name=alice read_weight=x\nUSER name=carol\nEND\nPING\n");
        String[] lines = reply.split("\n");
        assertTrue(lines[0].startsWith("ERR line 2 "), reply);
        assertTrue(lines[1].startsWith("OK vnode-sync-datanode-throttle"), reply);
        assertSame(before, throttles.policy());
        assertEquals(100, throttles.chargeFor("alice").read().ceiling.rate());
    }

    @Test
    void garbageAndTheOldProtocolGetErr() throws Exception {
        assertTrue(talk("HELLO_THERE\n").startsWith("ERR unknown request 'HELLO_THERE'"));
        assertTrue(talk("APPLY x\nEND\n").startsWith("ERR "));
        assertTrue(talk("APPLY 7\nUSER alice 1 2\nEND\n").startsWith("ERR "), "protocol 1's APPLY is refused");
        assertTrue(talk("APPLY\nEND\n").startsWith("ERR APPLY needs generation="));
        assertTrue(talk(String.join("", Collections.nCopies(10000, "x")) + "\n").startsWith("ERR unknown request"));
        assertEquals(-1, throttles.policy().generation());
    }

    @Test
    void applyCutShortAppliesNothing() throws Exception {
        assertEquals("", talk("APPLY generation=9\nUSER name=alice\n"));
        assertEquals(-1, throttles.policy().generation());
    }

    @Test
    void statsListsTheNodeDefaultAndEveryUserEverSeen() throws Exception {
        talk("APPLY generation=1\nUSER name=bob\nUSER name=alice\nEND\n");
        throttles.chargeFor("alice").counters().addBytes(Direction.WRITE, 42);
        throttles.chargeFor("alice").counters().addOp(Direction.WRITE);
        talk("APPLY generation=2\nUSER name=bob\nEND\n");
        String[] lines = talk("STATS\n").split("\n");
        assertTrue(lines[0].startsWith("NODE started_ms=1234 read_capacity_bps=0 read_rate_bps=0 "), lines[0]);
        assertTrue(lines[0].contains(" read_step=none ") && lines[0].contains(" write_step=none "), lines[0]);
        assertEquals("DEFAULT read_bytes=0 write_bytes=0 read_wait_ns=0 write_wait_ns=0 read_ops=0 write_ops=0"
                + " read_late_ns=0 write_late_ns=0", lines[1]);
        assertEquals("USER name=alice read_bytes=0 write_bytes=42 read_wait_ns=0 write_wait_ns=0 read_ops=0 write_ops=1"
                + " read_late_ns=0 write_late_ns=0", lines[2]);
        assertTrue(lines[3].startsWith("USER name=bob "));
        assertEquals("OK generation=2", lines[4]);
    }

    @Test
    void statsTellsHowLongEachRuleHeldRAndHowOftenItMovedIt() throws Exception {
        Throttles node = new Throttles(Policy.Shares.NONE, 1234);
        CapacityLoop capacity = new CapacityLoop(node, null);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        Protocol protocol = new Protocol(node, new Protocol.Environment(hooks, () -> "3.4.2", capacity));
        protocol.serve(new ByteArrayInputStream(("APPLY generation=1\nNODE read_capacity_bps=100000000\n"
                + "USER name=alice read_weight=1\nEND\n").getBytes(StandardCharsets.UTF_8)), new ByteArrayOutputStream());
        long now = 1_000_000_000L;
        capacity.tickWith(now, 0.1, 0, 0);   // the first tick only starts the clock
        capacity.tickWith(now + CapacityLoop.PERIOD_NS, 0.1, 0, 0);        // nothing moved: idle, R at the configured
        capacity.tickWith(now + 2 * CapacityLoop.PERIOD_NS, 0.1, 0, 0);
        protocol.serve(new ByteArrayInputStream("STATS\n".getBytes(StandardCharsets.UTF_8)), out);
        String[] lines = new String(out.toByteArray(), StandardCharsets.UTF_8).split("\n");
        assertTrue(lines[0].startsWith("NODE "), lines[0]);
        assertEquals("STEP direction=read step=idle seconds=0.200 moves=0", lines[1]);
        assertEquals("STEP direction=write step=none seconds=0.200 moves=0", lines[2]);
        assertTrue(lines[3].startsWith("DEFAULT "), lines[3]);
    }

    @Test
    void aStepTallyCountsTimeAndOnlyTheTicksThatMovedR() {
        StepTally tally = new StepTally();
        tally.add(CapacityControl.Step.HELD, 100_000_000L, 50, 50);
        tally.add(CapacityControl.Step.LOWERED_SKEWED, 100_000_000L, 50, 40);
        tally.add(CapacityControl.Step.HELD, 100_000_000L, 40, 40);
        assertEquals(200_000_000L, tally.nanos(CapacityControl.Step.HELD));
        assertEquals(0, tally.moves(CapacityControl.Step.HELD));
        assertEquals(1, tally.moves(CapacityControl.Step.LOWERED_SKEWED));
        assertEquals("STEP direction=read step=held seconds=0.200 moves=0\n"
                + "STEP direction=read step=lowered-skewed seconds=0.100 moves=1\n", tally.lines("read"));
    }
}
