package org.vnodesync.dnthrottle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.net.InetAddress;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

class ApplyParserTest {
    private static final Policy.Shares START = Policy.Shares.ceilings(7, 8);

    private static Policy parse(String... lines) throws Exception {
        return ApplyParser.parse(5, Arrays.asList(lines), START).policy();
    }

    @Test
    void parsesEveryKindOfLine() throws Exception {
        Policy p = parse("NODE read_capacity_bps=60000000 write_capacity_bps=50000000 devices=8:16,259:0",
                "DEFAULT read_weight=1 write_weight=1 read_ceiling_bps=100 write_ceiling_bps=200",
                "USER name=alice read_weight=8 write_weight=2.5 read_floor_bps=1000 write_ceiling_bps=2000",
                "USER name=bob_2", "UID uid=64001 name=alice", "CONN ip=10.0.0.7 port=41234 name=bob_2",
                "CONN ip=::1 port=50000 name=alice");
        assertEquals(5, p.generation());
        assertEquals(new Policy.Node(60_000_000, 50_000_000, Arrays.asList(new DeviceId(8, 16), new DeviceId(259, 0))),
                p.node());
        assertEquals(new Policy.Shares(new Policy.Share(1, 0, 100), new Policy.Share(1, 0, 200)), p.defaults());
        assertEquals(new Policy.Shares(new Policy.Share(8, 1000, 0), new Policy.Share(2.5, 0, 2000)), p.users().get("alice"));
        assertEquals(Policy.Shares.NONE, p.users().get("bob_2"));
        assertEquals("alice", p.uids().get(64001L));
        assertEquals("bob_2", p.connections().get(new Policy.Endpoint(InetAddress.getByName("10.0.0.7"), 41234)));
        assertEquals("alice", p.connections().get(new Policy.Endpoint(InetAddress.getByName("::1"), 50000)));
    }

    @Test
    void defaultLeftOutMeansTheAgentArguments() throws Exception {
        assertEquals(START, parse("USER name=alice read_weight=1").defaults());
        assertEquals(Policy.Node.NONE, parse("USER name=alice").node());
    }

    @Test
    void keysAndLineKindsItDoesNotKnowAreSkippedSoANewerPeerDoesNotBreakIt() throws Exception {
        ApplyParser.Parsed parsed = ApplyParser.parse(1, Arrays.asList(
                "USER name=alice read_weight=3 read_iops_weight=9",
                "SYSTEM read_weight=2", "NODE read_capacity_bps=10 future_counter=4"), START);
        assertEquals(3, parsed.policy().users().get("alice").read().weight());
        assertEquals(10, parsed.policy().node().readCapacity());
        assertEquals(1, parsed.skipped());
    }

    @Test
    void rejectsBadLines() {
        for (String bad : Arrays.asList("USER name=Alice", "USER name=alice read_weight=-1", "USER read_weight=1",
                "USER name=alice read_weight=1 read_weight=2", "USER name=../etc", "DEFAULT read_ceiling_bps=x",
                "USER name=alice read_weight=NaN", "USER name=alice read_weight=1e999", "UID uid=4294967295 name=alice",
                "UID uid=-1 name=alice", "CONN ip=host.example port=1 name=a", "CONN ip=300.0.0.1 port=1 name=a",
                "CONN ip=10.0.0.1 port=0 name=a", "CONN ip=10.0.0.1 port=65536 name=a", "foo", "",
                "USER  name=alice", "USER name=alice 5", "NODE devices=8", "NODE devices=8:16,",
                "USER name=alice read_ceiling_bps=99999999999999999999",
                "USER name=abcdefghijklmnopqrstuvwxyz0123456", "USER name=alice.x", "USER name=alice.", "USER name=alice..1",
                "USER name=alice.1/2", "CONN ip=10.0.0.1 port=1 name=alice.12[3]")) {
            assertThrows(ApplyParser.BadApply.class, () -> parse(bad), bad);
        }
    }

    @Test
    void acceptsJobVNodeNames() throws Exception {
        for (String job : Arrays.asList("alice.123", "alice.123_4", "alice.12-3.pbs-1.example", "alice.12-")) {
            assertEquals(1, parse("USER name=" + job).users().size(), job);
            assertEquals(job, parse("CONN ip=10.0.0.1 port=1 name=" + job).connections().values().iterator().next());
        }
    }

    @Test
    void rejectsDuplicates() {
        for (List<String> bad : Arrays.asList(Arrays.asList("DEFAULT", "DEFAULT"), Arrays.asList("NODE", "NODE"),
                Arrays.asList("USER name=a", "USER name=a"), Arrays.asList("UID uid=1 name=a", "UID uid=1 name=b"),
                Arrays.asList("CONN ip=1.2.3.4 port=5 name=a", "CONN ip=1.2.3.4 port=5 name=b"))) {
            assertThrows(ApplyParser.BadApply.class, () -> ApplyParser.parse(1, bad, START), bad.toString());
        }
    }
}
