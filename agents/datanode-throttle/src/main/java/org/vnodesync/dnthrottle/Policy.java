package org.vnodesync.dnthrottle;

import java.net.InetAddress;
import java.util.List;
import java.util.Map;

/**
 * One complete set as pushed by the storage agent (an APPLY), immutable: swapped in as a whole.
 * Generation -1 means no APPLY yet (only the -javaagent defaults).
 */
record Policy(long generation, Node node, Shares defaults, Map<String, Shares> users, Map<Long, String> uids,
              Map<Endpoint, String> connections) {

    /** What one user may do in one direction: weight (0: not scheduled by weight), floor and ceiling in bytes/s (0: none). */
    record Share(double weight, long floorBps, long ceilingBps) {
        static final Share NONE = new Share(0, 0, 0);
    }

    record Shares(Share read, Share write) {
        static final Shares NONE = new Shares(Share.NONE, Share.NONE);

        /** Ceilings only: what the -javaagent default rates mean. */
        static Shares ceilings(long readBps, long writeBps) {
            return new Shares(new Share(0, 0, readBps), new Share(0, 0, writeBps));
        }

        Share of(Direction direction) {
            return direction == Direction.READ ? read : write;
        }
    }

    /** The node as a whole: its configured capacity per direction (0: weights off) and its data devices. */
    record Node(long readCapacity, long writeCapacity, List<DeviceId> devices) {
        static final Node NONE = new Node(0, 0, List.of());

        long capacity(Direction direction) {
            return direction == Direction.READ ? readCapacity : writeCapacity;
        }
    }

    /** A remote client's end of a connection. */
    record Endpoint(InetAddress address, int port) {
    }

    static Policy initial(Shares defaults) {
        return new Policy(-1, Node.NONE, defaults, Map.of(), Map.of(), Map.of());
    }
}
