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
        new Protocol(throttles, new Protocol.Environment(hooks, () -> "3.4.2"))
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
                + " hadoop=3.4.2 started_ms=1234 scheduler=sfq-depth watch=threads hook.BlockSender.sendBlock=skipped"
                + " hook.DataXceiver.readBlock=woven\n", talk("HELLO protocol=2 client=vnode-sync/0.1.0\n"));
    }

    @Test
    void helloNamesTheDataNodesJvmAndBlockTokensAndAnUnreadableSettingIsLeftOut() throws Exception {
        java.util.Map<String, String> settings = new java.util.LinkedHashMap<>();
        settings.put("java", "1.8.0_392");
        settings.put("block_tokens", "false");
        Protocol protocol = new Protocol(throttles,
                new Protocol.Environment(hooks, () -> "3.3.6", new OpThreads(), () -> settings));
        String hello = protocol.handle("HELLO protocol=2", new ByteArrayInputStream(new byte[0]));
        assertTrue(hello.contains(" hadoop=3.3.6 started_ms=1234 scheduler=sfq-depth watch=threads java=1.8.0_392"
                + " block_tokens=false\n"), hello);
        Protocol broken = new Protocol(throttles, new Protocol.Environment(hooks, () -> "3.3.6", new OpThreads(),
                () -> {
                    throw new IllegalStateException("no hdfs-site.xml");
                }));
        String without = broken.handle("HELLO protocol=2", new ByteArrayInputStream(new byte[0]));
        assertTrue(without.startsWith("OK protocol=2 ") && !without.contains("java="), without);
    }

    @Test
    void theDataNodesSettingsAreItsJvmsAndItsConfigurations() {
        java.util.Map<String, String> settings = Agent.dataNodeSettings();
        assertEquals(System.getProperty("java.version"), settings.get("java"));
        assertEquals("false", settings.get("block_tokens"), "no hdfs-site.xml on the test classpath: Hadoop's default");
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
        assertEquals(60_000_000, throttles.policy().node().readCapacity());
        assertEquals(8.0, throttles.chargeFor("alice").read().weight);
        assertEquals("OK generation=4\n", talk("APPLY generation=4\nUSER name=bob read_ceiling_bps=5\nEND\n"));
        Policy p = throttles.policy();
        assertEquals(4, p.generation());
        assertEquals(Policy.Shares.NONE, p.defaults());
        assertEquals(1, p.users().size());
        assertEquals(5, throttles.chargeFor("bob").read().ceiling.rate());
        assertEquals(0, throttles.policy().node().readCapacity(), "no NODE line: no capacity");
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
        assertEquals("NODE started_ms=1234 read_capacity_bps=0 write_capacity_bps=0 volumes=0", lines[0]);
        assertEquals("DEFAULT read_bytes=0 write_bytes=0 read_wait_ns=0 write_wait_ns=0 read_ops=0 write_ops=0", lines[1]);
        assertEquals("USER name=alice read_bytes=0 write_bytes=42 read_wait_ns=0 write_wait_ns=0 read_ops=0 write_ops=1", lines[2]);
        assertTrue(lines[3].startsWith("USER name=bob "));
        assertEquals("OK generation=2", lines[4]);
    }

    @Test
    void statsListsEachVolumesDepthAndWhatItMoved() throws Exception {
        Throttles node = new Throttles(Policy.Shares.NONE, 1234);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        Protocol protocol = new Protocol(node, new Protocol.Environment(hooks, () -> "3.4.2"));
        protocol.serve(new ByteArrayInputStream(("APPLY generation=1\nUSER name=alice read_weight=1\nEND\n")
                .getBytes(StandardCharsets.UTF_8)), new ByteArrayOutputStream());
        Dispatcher volume = node.volume("DS-1");
        Dispatcher.Ticket ticket = new Dispatcher.Ticket(node.flow(volume, node.chargeFor("alice")), Direction.READ,
                Thread.currentThread());
        volume.tick(0);
        volume.ask(ticket, 0, 1, false, 0);
        volume.ask(ticket, 1_000_000, 1, false, 50_000_000L);
        volume.tick(100_000_000L);
        protocol.serve(new ByteArrayInputStream("STATS\n".getBytes(StandardCharsets.UTF_8)), out);
        String[] lines = new String(out.toByteArray(), StandardCharsets.UTF_8).split("\n");
        assertEquals("NODE started_ms=1234 read_capacity_bps=0 write_capacity_bps=0 volumes=1", lines[0]);
        assertEquals("VOLUME id=DS-1 depth=1 in_flight=1 waiting=0 moved_bps=10000000 probes=0 moves=0", lines[1]);
        assertTrue(lines[2].startsWith("DEFAULT "), lines[2]);
    }
}
