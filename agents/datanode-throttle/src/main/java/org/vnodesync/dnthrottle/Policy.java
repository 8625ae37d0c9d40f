package org.vnodesync.dnthrottle;

import java.net.InetAddress;
import java.util.Map;

/**
 * One complete rate set as pushed by the storage agent (an APPLY), immutable: swapped in as a whole.
 * Generation -1 means no APPLY yet (only the -javaagent defaults).
 */
record Policy(long generation, Rates defaults, Map<String, Rates> users, Map<Long, String> uids,
              Map<Endpoint, String> connections) {

    record Rates(long readBps, long writeBps) {
        long of(Direction direction) {
            return direction == Direction.READ ? readBps : writeBps;
        }
    }

    /** A remote client's end of a connection. */
    record Endpoint(InetAddress address, int port) {
    }

    static Policy initial(Rates defaults) {
        return new Policy(-1, defaults, Map.of(), Map.of(), Map.of());
    }
}
