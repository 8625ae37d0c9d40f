package org.vnodesync.dnthrottle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class ProtocolTest {
    private final Throttles throttles = new Throttles(new Policy.Rates(0, 0), 1234);

    private String talk(String input) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        new Protocol(throttles).serve(new ByteArrayInputStream(input.getBytes(StandardCharsets.UTF_8)), out);
        return out.toString(StandardCharsets.UTF_8);
    }

    @Test
    void pingNamesTheAgent() throws Exception {
        assertEquals("OK vnode-sync-datanode-throttle " + Protocol.VERSION + " started=1234\n", talk("PING\n"));
    }

    @Test
    void applyReplacesTheWholeSet() throws Exception {
        assertEquals("OK 3\n", talk("APPLY 3\nDEFAULT 10 20\nUSER alice 100 200\nUSER bob 1 2\nEND\n"));
        assertEquals("OK 4\n", talk("APPLY 4\nUSER bob 5 6\nEND\n"));
        Policy p = throttles.policy();
        assertEquals(4, p.generation());
        assertEquals(new Policy.Rates(0, 0), p.defaults());
        assertEquals(1, p.users().size());
        assertEquals(5, throttles.chargeFor("bob").read().rate());
        assertSame(throttles.chargeFor(null), throttles.chargeFor("alice"), "alice left: DEFAULT for new ops");
    }

    @Test
    void aBadLineChangesNothingAndTheConversationGoesOn() throws Exception {
        talk("APPLY 1\nUSER alice 100 200\nEND\n");
        Policy before = throttles.policy();
        String reply = talk("APPLY 2\nUSER bob 1 2\nUSER alice 1 x\nUSER carol 1 1\nEND\nPING\n");
        String[] lines = reply.split("\n");
        assertTrue(lines[0].startsWith("ERR line 2 "), reply);
        assertTrue(lines[1].startsWith("OK vnode-sync-datanode-throttle"), reply);
        assertSame(before, throttles.policy());
        assertEquals(100, throttles.chargeFor("alice").read().rate());
    }

    @Test
    void garbageGetsErr() throws Exception {
        assertTrue(talk("HELLO\n").startsWith("ERR unknown request 'HELLO'"));
        assertTrue(talk("APPLY x\nEND\n").startsWith("ERR "));
        assertTrue(talk("APPLY\nEND\n").startsWith("ERR usage"));
        assertTrue(talk("x".repeat(10000) + "\n").startsWith("ERR unknown request"));
        assertEquals(-1, throttles.policy().generation());
    }

    @Test
    void applyCutShortAppliesNothing() throws Exception {
        assertEquals("", talk("APPLY 9\nUSER alice 1 1\n"));
        assertEquals(-1, throttles.policy().generation());
    }

    @Test
    void statsListsDefaultAndEveryUserEverSeen() throws Exception {
        talk("APPLY 1\nUSER bob 0 0\nUSER alice 0 0\nEND\n");
        throttles.chargeFor("alice").counters().addBytes(Direction.WRITE, 42);
        throttles.chargeFor("alice").counters().addOp(Direction.WRITE);
        talk("APPLY 2\nUSER bob 0 0\nEND\n");
        assertEquals("STARTED 1234\nDEFAULT 0 0 0 0 0 0\nUSER alice 0 42 0 0 0 1\nUSER bob 0 0 0 0 0 0\nOK 2\n",
                talk("STATS\n"));
    }
}
