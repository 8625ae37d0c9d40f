package org.vnodesync.dnthrottle;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The benchmark's weighted max-min shares (EdgeScenarios.shares), on cases whose shares are known. */
class EdgeScenariosTest {
    static final double MB = 1e6;
    static final double INF = Double.POSITIVE_INFINITY;

    private static EdgeScenarios.UserSpec bulk(String name, double weight, double clientBps, int... volumes) {
        return new EdgeScenarios.UserSpec(name, EdgeScenarios.Kind.BULK_READER, weight, volumes.length, clientBps, 0, 0,
                0, volumes);
    }

    private static EdgeScenarios.Scenario node(List<EdgeScenarios.VolumeSpec> volumes, double cpuPerByte,
                                               List<EdgeScenarios.UserSpec> users) {
        return new EdgeScenarios.Scenario(0, "t", volumes, 0, cpuPerByte, INF, INF, true, 0,
                SimulatedNode.ReadAhead.WINDOW, 0, true, users);
    }

    private static void near(double expected, double actual) {
        assertEquals(expected / MB, actual / MB, 1e-6);
    }

    @Test
    void twoReadersOfCachedFilesOnBindingCoresSplitOneToTwoWhereTheirPacketsTakeSlotsAndAlikeWhereTheyTakeNone() {
        // tests/e2e/test_hdfs_short_circuit.py's case, which branch ra58b broke on real HDFS (431 : 435 MB/s).
        Map<String, Double> main = EdgeScenarios.shortCircuit(SimulatedNode.Sharing.WEIGHTS, true, 5);
        double alice = main.get("alice");
        double bob = main.get("bob");
        assertEquals(2.0, bob / alice, 0.2, "read58c: alice " + alice / MB + " bob " + bob / MB + " MB/s");
        Map<String, Double> none = EdgeScenarios.shortCircuit(SimulatedNode.Sharing.NONE, true, 5);
        double all = none.get("alice") + none.get("bob");
        assertEquals(all, alice + bob, 0.05 * all, "the cores' throughput, weights against none");
        Map<String, Double> ra58b = EdgeScenarios.shortCircuit(SimulatedNode.Sharing.WEIGHTS, false, 5);
        assertEquals(1.0, ra58b.get("bob") / ra58b.get("alice"), 0.1, "ra58b: " + ra58b);
    }

    @Test
    void aUserOnTwoVolumesHasItsShareOfEachAndWhatTheOthersLeaveOnTheSlowOne() {
        Map<String, Double> s = EdgeScenarios.shares(node(List.of(new EdgeScenarios.VolumeSpec("v0", 150 * MB, false),
                new EdgeScenarios.VolumeSpec("v1", 30 * MB, false)), 0,
                List.of(bulk("alice", 4, INF, 0), bulk("bob", 1, INF, 0, 1))), Map.of());
        near(120 * MB, s.get("alice"));
        near(60 * MB, s.get("bob"));
        near(30 * MB, s.get("bob@1"));
    }

    @Test
    void onBindingCoresAThreadTakesOneCoreAtMostAndTheRestGoesByWeight() {
        List<EdgeScenarios.VolumeSpec> disk = List.of(new EdgeScenarios.VolumeSpec("v0", 1000 * MB, false));
        Map<String, Double> one = EdgeScenarios.shares(node(disk, 1 / (30 * MB),
                List.of(bulk("alice", 8, INF, 0), bulk("bob", 4, INF, 0))), Map.of());
        near(30 * MB, one.get("alice"));
        near(30 * MB, one.get("bob"));
        Map<String, Double> three = EdgeScenarios.shares(node(disk, 1 / (30 * MB),
                List.of(bulk("alice", 8, INF, 0, 0, 0), bulk("bob", 4, INF, 0, 0, 0))), Map.of());
        near(40 * MB, three.get("alice"));
        near(20 * MB, three.get("bob"));
    }

    @Test
    void aSlowClientAndAnInteractiveUsersDemandLeaveTheRestToTheOthers() {
        List<EdgeScenarios.VolumeSpec> disk = List.of(new EdgeScenarios.VolumeSpec("v0", 100 * MB, false));
        EdgeScenarios.UserSpec reader = new EdgeScenarios.UserSpec("carol", EdgeScenarios.Kind.INTERACTIVE_READER, 16, 1,
                INF, 1 << 20, 1_000_000_000L, 0, new int[] {0});
        Map<String, Double> s = EdgeScenarios.shares(node(disk, 0,
                List.of(bulk("alice", 8, 10 * MB, 0), bulk("bob", 1, INF, 0), reader)), Map.of("carol", 5 * MB));
        near(10 * MB, s.get("alice"));
        near(85 * MB, s.get("bob"));
        near(5 * MB, s.get("carol"));
    }

    @Test
    void anHddLikeVolumeIsSharedAtItsSpeedWithAllItsThreadsInFlight() {
        Map<String, Double> s = EdgeScenarios.shares(node(List.of(new EdgeScenarios.VolumeSpec("v0", 100 * MB, true)), 0,
                List.of(bulk("alice", 3, INF, 0, 0), bulk("bob", 1, INF, 0))), Map.of());
        near(0.75 * 140 * MB, s.get("alice"));   // 3 in flight: 1 + 0.2 x 2 = 1.4x
        near(0.25 * 140 * MB, s.get("bob"));
    }
}
