package org.vnodesync.dnthrottle;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.OptionalLong;

/**
 * What deciding a new connection's user costs a DataNode with block tokens off, before and after issue
 * 27's change, on this host's kernel (benchmarks/datanode_identity_cost.py runs it):
 * before: walk /proc/net/tcp{,6} for the socket's owner, then look at the CONN lines (the old order);
 * after: Identity as it is now (CONN first, a lookup only for this host's clients, by sock_diag).
 * Three kinds of client: one a compute agent reported (CONN), one on another host nobody reported, one
 * on this host (UID). Wall and thread CPU time (user + kernel) per lookup, median over the rounds.
 *
 *   java -cp vnode-sync-datanode-throttle.jar:test-classes:hadoop/jars/* org.vnodesync.dnthrottle.IdentityCost [rounds] [sockets]
 */
public final class IdentityCost {
    private IdentityCost() {
    }

    interface Lookup {
        String resolve(String remote, String local) throws Exception;
    }

    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 200;
        int sockets = Math.max(args.length > 1 ? Integer.parseInt(args[1]) : 200, rounds + 5);
        long me = ((Number) Files.getAttribute(Paths.get("/proc/self"), "unix:uid")).longValue();
        InetAddress loopback = InetAddress.getLoopbackAddress();
        try (ServerSocket server = new ServerSocket(0, sockets + 10, loopback)) {
            List<Socket> open = new ArrayList<>();
            for (int i = 0; i < sockets; i++) {  // a DataNode with connections open
                open.add(new Socket(loopback, server.getLocalPort()));
                open.add(server.accept());
            }
            String serverEnd = "/127.0.0.1:" + server.getLocalPort();
            String[] sameHost = new String[sockets];  // each round a connection not seen before
            for (int i = 0; i < sockets; i++) {
                sameHost[i] = "/127.0.0.1:" + open.get(2 * i).getLocalPort();
            }
            Policy policy = ApplyParser.parse(1, Arrays.asList("USER name=alice", "USER name=bob", "UID uid=" + me
                    + " name=alice", "CONN ip=10.0.0.9 port=40000 name=bob"), Policy.Shares.NONE).policy();
            SocketOwners walk = new SocketOwners(Paths.get("/proc/self/net"));
            Lookup before = (remote, localAddress) -> {
                Policy.Endpoint client = Identity.parseAddress(remote);
                OptionalLong uid = walk.ownerOf(client, Identity.parseAddress(localAddress));
                String user = uid.isPresent() ? policy.uids().get(uid.getAsLong()) : null;
                return user != null ? user : policy.connections().get(client);
            };
            OwnerLookup diag = SockDiag.unavailable() == null ? new SockDiag() : walk;
            Identity identity = new Identity(diag);  // one per DataNode, as the agent has
            Lookup after = (remote, localAddress) -> identity.resolve(policy, null, remote, localAddress);
            String[][] cases = {
                {"remote, reported by a compute agent (CONN)", "/10.0.0.9:40000", "/10.0.0.1:9866", "bob"},
                {"remote, not reported (DEFAULT)", "/192.0.2.7:40001", "/10.0.0.1:9866", null},
                {"same host (UID)", null, serverEnd, "alice"},
            };
            System.out.printf("identity of a new connection, block tokens off: %d rounds, %d open sockets, "
                    + "same-host lookup %s%n", rounds, 2 * sockets, diag instanceof SockDiag ? "sock_diag" : "walk");
            System.out.printf("%-44s %14s %14s %14s %14s %8s%n", "client", "before wall us", "before cpu us",
                    "after wall us", "after cpu us", "cpu x");
            for (String[] c : cases) {
                String[] remotes = c[1] != null ? new String[] {c[1]} : sameHost;
                double[] b = measure(before, remotes, c[2], c[3], rounds);
                double[] a = measure(after, remotes, c[2], c[3], rounds);
                System.out.printf("%-44s %14.1f %14.1f %14.1f %14.1f %8.0f%n", c[0], b[0], b[1], a[0], a[1],
                        b[1] / Math.max(a[1], 0.1));
            }
            for (Socket s : open) {
                s.close();
            }
        }
    }

    /** Median wall and thread-CPU microseconds per lookup; each answer checked. */
    private static double[] measure(Lookup lookup, String[] remotes, String local, String expected, int rounds)
            throws Exception {
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        double[] wall = new double[rounds];
        double[] cpu = new double[rounds];
        for (int i = -5; i < rounds; i++) {
            long c0 = threads.getCurrentThreadCpuTime();
            long t0 = System.nanoTime();
            String remote = remotes[Math.floorMod(i, remotes.length)];
            String user = lookup.resolve(remote, local);
            long t1 = System.nanoTime();
            long c1 = threads.getCurrentThreadCpuTime();
            if (!java.util.Objects.equals(user, expected)) {
                throw new IllegalStateException(remote + ": " + user + " instead of " + expected);
            }
            if (i >= 0) {
                wall[i] = (t1 - t0) / 1e3;
                cpu[i] = (c1 - c0) / 1e3;
            }
        }
        java.util.Arrays.sort(wall);
        java.util.Arrays.sort(cpu);
        return new double[] {wall[rounds / 2], cpu[rounds / 2]};
    }
}
