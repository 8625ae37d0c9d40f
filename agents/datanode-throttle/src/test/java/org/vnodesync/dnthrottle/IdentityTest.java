package org.vnodesync.dnthrottle;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Collections;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class IdentityTest {
    private static final Path PROC = Paths.get("src/test/resources/proc");
    private final SocketOwners owners = new SocketOwners(PROC, true);
    private final Identity identity = new Identity(owners);

    private static Policy.Endpoint at(String ip, int port) throws Exception {
        return new Policy.Endpoint(InetAddress.getByName(ip), port);
    }

    private static Policy policy() throws Exception {
        return ApplyParser.parse(1, Arrays.asList("USER name=alice", "USER name=bob", "UID uid=64001 name=alice",
                "UID uid=64002 name=bob", "CONN ip=10.0.0.9 port=40000 name=bob"), Policy.Shares.NONE).policy();
    }

    @Test
    void procNetTcpGivesTheClientSocketsOwner() throws Exception {
        assertEquals(OptionalLong.of(64001), owners.ownerOf(at("127.0.0.1", 0xB26E), at("127.0.0.1", 0x2712)));
        assertEquals(OptionalLong.of(0), owners.ownerOf(at("127.0.0.1", 0x2712), at("127.0.0.1", 0xB26E)));
        assertEquals(OptionalLong.empty(), owners.ownerOf(at("127.0.0.1", 0xB26E), at("127.0.0.1", 0x1111)));
    }

    @Test
    void tcp6WithV4MappedAndPlainIpv6() throws Exception {
        assertEquals(OptionalLong.of(64002), owners.ownerOf(at("127.0.0.1", 0xC350), at("127.0.0.1", 0x2712)));
        assertEquals(OptionalLong.of(64003), owners.ownerOf(at("::1", 0xC351), at("::1", 0x2712)));
    }

    @Test
    void bigEndianHostsReadTheWordsTheOtherWay() {
        assertEquals(new SocketOwners(PROC, false).endpoint("7F000001:0050").address().getHostAddress(), "127.0.0.1");
        assertNull(owners.endpoint("garbage"));
    }

    @Test
    void tokenUserComesFirst() throws Exception {
        assertEquals("carol", identity.resolve(policy(), "carol", "/127.0.0.1:45678", "/127.0.0.1:10002"));
    }

    @Test
    void sameHostOwnerThenConnectionThenNobody() throws Exception {
        assertEquals("alice", identity.resolve(policy(), "", "/127.0.0.1:45678", "/127.0.0.1:10002"));
        assertEquals("bob", identity.resolve(policy(), null, "/[::ffff:127.0.0.1]:50000", "/127.0.0.1:10002"));
        assertEquals("bob", identity.resolve(policy(), null, "client.example/10.0.0.9:40000", "/10.0.0.1:9866"));
        assertNull(identity.resolve(policy(), null, "/10.0.0.9:40001", "/10.0.0.1:9866"));
        assertNull(identity.resolve(policy(), null, "/some/unix/socket", null));
    }

    @Test
    void aConnectionsOwnerIsLookedUpOncePerConnection(@TempDir Path proc) throws Exception {
        String header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
        String client = "   1: 0100007F:B26E 0100007F:2712 01 00000000:00000000 00:00000000 00000000 %d        0 1002 1\n";
        Files.write(proc.resolve("tcp"), (header + String.format(client, 64001)).getBytes(StandardCharsets.UTF_8));
        Identity fresh = new Identity(new SocketOwners(proc, true));
        assertEquals("alice", fresh.resolve(policy(), null, "/127.0.0.1:45678", "/127.0.0.1:10002"));
        String another = "   2: 0100007F:B26F 0100007F:2712 01 00000000:00000000 00:00000000 00000000 64002        0 1004 1\n";
        Files.write(proc.resolve("tcp"),
                (header + String.format(client, 64002) + another).getBytes(StandardCharsets.UTF_8));
        // The same connection (its DataXceiver thread and addresses): the first op's answer, no new lookup.
        assertEquals("alice", fresh.resolve(policy(), null, "/127.0.0.1:45678", "/127.0.0.1:10002"));
        // Another connection, or the same addresses on another thread: looked up again.
        assertEquals("bob", fresh.resolve(policy(), null, "/127.0.0.1:45679", "/127.0.0.1:10002"));
        String[] elsewhere = new String[1];
        Thread other = new Thread(() -> {
            try {
                elsewhere[0] = fresh.resolve(policy(), null, "/127.0.0.1:45678", "/127.0.0.1:10002");
            } catch (Exception e) {
                elsewhere[0] = e.toString();
            }
        });
        other.start();
        other.join();
        assertEquals("bob", elsewhere[0]);
    }

    @Test
    void aJobVNodeOfTheTokensUserReportedForTheConnectionIsCharged() throws Exception {
        Policy jobs = ApplyParser.parse(1, Arrays.asList("USER name=carol", "USER name=carol.77",
                "CONN ip=10.0.0.9 port=40000 name=carol.77", "CONN ip=10.0.0.9 port=40001 name=dave.78"),
                Policy.Shares.NONE).policy();
        assertEquals("carol.77", identity.resolve(jobs, "carol", "/10.0.0.9:40000", "/10.0.0.1:9866"));
        // Another user's job never takes the token's user's op; nor does a user name that merely begins alike.
        assertEquals("carol", identity.resolve(jobs, "carol", "/10.0.0.9:40001", "/10.0.0.1:9866"));
        assertEquals("caro", identity.resolve(jobs, "caro", "/10.0.0.9:40000", "/10.0.0.1:9866"));
    }

    @Test
    void addressStrings() throws Exception {
        assertEquals(at("::1", 80), Identity.parseAddress("/0:0:0:0:0:0:0:1:80"));
        assertEquals(at("::1", 80), Identity.parseAddress("/[::1]:80"));
        assertEquals(at("1.2.3.4", 5), Identity.parseAddress("h/1.2.3.4:5"));
        assertNull(Identity.parseAddress("h/1.2.3.4"));
    }

    @Test
    void unknownUsersAreChargedToDefault() throws Exception {
        Throttles t = new Throttles(Policy.Shares.NONE, 0);
        t.apply(policy());
        assertEquals("alice", t.chargeFor("alice").name());
        assertEquals(Throttles.DEFAULT, t.chargeFor("carol").name());
        assertEquals(Collections.emptyMap(), Policy.initial(Policy.Shares.NONE).users());
    }

    @Test
    void aReportedConnectionAndAnotherHostsClientCostNoSocketLookup() throws Exception {
        int[] lookups = {0};
        OwnerLookup counting = (client, server) -> {
            lookups[0]++;
            return owners.ownerOf(client, server);
        };
        Identity cheap = new Identity(counting);
        assertEquals("bob", cheap.resolve(policy(), null, "/10.0.0.9:40000", "/10.0.0.1:9866"));
        assertNull(cheap.resolve(policy(), null, "/10.0.0.9:40001", "/10.0.0.1:9866"));
        assertNull(cheap.resolve(policy(), null, "/192.0.2.7:40001", "/10.0.0.1:9866"));
        assertEquals(0, lookups[0]);
        assertEquals("alice", cheap.resolve(policy(), null, "/127.0.0.1:45678", "/127.0.0.1:10002"));
        assertEquals(1, lookups[0]);  // a client on this host: one lookup
    }
}
