package org.vnodesync.dnthrottle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.net.InetAddress;
import java.util.List;
import org.junit.jupiter.api.Test;

class ApplyParserTest {
    private static final Policy.Rates START = new Policy.Rates(7, 8);

    @Test
    void parsesEveryKindOfLine() throws Exception {
        Policy p = ApplyParser.parse(5, List.of("DEFAULT 100 200", "USER alice 1000 2000", "USER bob_2 0 0",
                "UID 64001 alice", "CONN 10.0.0.7 41234 bob_2", "CONN ::1 50000 alice"), START);
        assertEquals(5, p.generation());
        assertEquals(new Policy.Rates(100, 200), p.defaults());
        assertEquals(new Policy.Rates(1000, 2000), p.users().get("alice"));
        assertEquals(new Policy.Rates(0, 0), p.users().get("bob_2"));
        assertEquals("alice", p.uids().get(64001L));
        assertEquals("bob_2", p.connections().get(new Policy.Endpoint(InetAddress.getByName("10.0.0.7"), 41234)));
        assertEquals("alice", p.connections().get(new Policy.Endpoint(InetAddress.getByName("::1"), 50000)));
    }

    @Test
    void defaultLeftOutMeansTheAgentArguments() throws Exception {
        assertEquals(START, ApplyParser.parse(1, List.of("USER alice 1 2"), START).defaults());
    }

    @Test
    void rejectsBadLines() {
        for (String bad : List.of("USER Alice 1 2", "USER alice -1 2", "USER alice 1", "USER alice 1 2 3",
                "USER ../etc 1 2", "DEFAULT 1 x", "UID 4294967295 alice", "UID -1 alice", "CONN host.example 1 a",
                "CONN 300.0.0.1 1 a", "CONN 10.0.0.1 0 a", "CONN 10.0.0.1 65536 a", "FOO", "", "USER  alice 1 2",
                "USER alice 99999999999999999999 1", "USER abcdefghijklmnopqrstuvwxyz0123456 1 2")) {
            assertThrows(ApplyParser.BadApply.class, () -> ApplyParser.parse(1, List.of(bad), START), bad);
        }
    }

    @Test
    void rejectsDuplicates() {
        for (List<String> bad : List.of(List.of("DEFAULT 1 1", "DEFAULT 2 2"), List.of("USER a 1 1", "USER a 2 2"),
                List.of("UID 1 a", "UID 1 b"), List.of("CONN 1.2.3.4 5 a", "CONN 1.2.3.4 5 b"))) {
            assertThrows(ApplyParser.BadApply.class, () -> ApplyParser.parse(1, bad, START), bad.toString());
        }
    }
}
