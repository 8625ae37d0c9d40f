package org.vnodesync.dnthrottle;

import java.net.InetAddress;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * One complete set as pushed by the storage agent (an APPLY), immutable: swapped in as a whole.
 * Generation -1 means no APPLY yet (only the -javaagent defaults).
 */
final class Policy {
    private final long generation;
    private final Node node;
    private final Shares defaults;
    private final Map<String, Shares> users;
    private final Map<Long, String> uids;
    private final Map<Endpoint, String> connections;

    Policy(long generation, Node node, Shares defaults, Map<String, Shares> users, Map<Long, String> uids,
           Map<Endpoint, String> connections) {
        this.generation = generation;
        this.node = node;
        this.defaults = defaults;
        this.users = users;
        this.uids = uids;
        this.connections = connections;
    }

    long generation() {
        return generation;
    }

    Node node() {
        return node;
    }

    Shares defaults() {
        return defaults;
    }

    Map<String, Shares> users() {
        return users;
    }

    Map<Long, String> uids() {
        return uids;
    }

    Map<Endpoint, String> connections() {
        return connections;
    }

    /** What one user may do in one direction: weight (0: not scheduled by weight), floor and ceiling in bytes/s (0: none). */
    static final class Share {
        static final Share NONE = new Share(0, 0, 0);

        private final double weight;
        private final long floorBps;
        private final long ceilingBps;

        Share(double weight, long floorBps, long ceilingBps) {
            this.weight = weight;
            this.floorBps = floorBps;
            this.ceilingBps = ceilingBps;
        }

        double weight() {
            return weight;
        }

        long floorBps() {
            return floorBps;
        }

        long ceilingBps() {
            return ceilingBps;
        }

        @Override
        public boolean equals(Object o) {
            if (!(o instanceof Share)) {
                return false;
            }
            Share other = (Share) o;
            return Double.compare(weight, other.weight) == 0 && floorBps == other.floorBps
                    && ceilingBps == other.ceilingBps;
        }

        @Override
        public int hashCode() {
            return Objects.hash(weight, floorBps, ceilingBps);
        }

        @Override
        public String toString() {
            return "Share[weight=" + weight + ", floorBps=" + floorBps + ", ceilingBps=" + ceilingBps + "]";
        }
    }

    static final class Shares {
        static final Shares NONE = new Shares(Share.NONE, Share.NONE);

        private final Share read;
        private final Share write;

        Shares(Share read, Share write) {
            this.read = read;
            this.write = write;
        }

        /** Ceilings only: what the -javaagent default rates mean. */
        static Shares ceilings(long readBps, long writeBps) {
            return new Shares(new Share(0, 0, readBps), new Share(0, 0, writeBps));
        }

        Share read() {
            return read;
        }

        Share write() {
            return write;
        }

        Share of(Direction direction) {
            return direction == Direction.READ ? read : write;
        }

        @Override
        public boolean equals(Object o) {
            if (!(o instanceof Shares)) {
                return false;
            }
            Shares other = (Shares) o;
            return read.equals(other.read) && write.equals(other.write);
        }

        @Override
        public int hashCode() {
            return Objects.hash(read, write);
        }

        @Override
        public String toString() {
            return "Shares[read=" + read + ", write=" + write + "]";
        }
    }

    /** The node as a whole: its configured capacity per direction (0: weights off) and its data devices. */
    static final class Node {
        static final Node NONE = new Node(0, 0, Collections.<DeviceId>emptyList());

        private final long readCapacity;
        private final long writeCapacity;
        private final List<DeviceId> devices;

        Node(long readCapacity, long writeCapacity, List<DeviceId> devices) {
            this.readCapacity = readCapacity;
            this.writeCapacity = writeCapacity;
            this.devices = devices;
        }

        long readCapacity() {
            return readCapacity;
        }

        long writeCapacity() {
            return writeCapacity;
        }

        List<DeviceId> devices() {
            return devices;
        }

        long capacity(Direction direction) {
            return direction == Direction.READ ? readCapacity : writeCapacity;
        }

        @Override
        public boolean equals(Object o) {
            if (!(o instanceof Node)) {
                return false;
            }
            Node other = (Node) o;
            return readCapacity == other.readCapacity && writeCapacity == other.writeCapacity
                    && devices.equals(other.devices);
        }

        @Override
        public int hashCode() {
            return Objects.hash(readCapacity, writeCapacity, devices);
        }

        @Override
        public String toString() {
            return "Node[readCapacity=" + readCapacity + ", writeCapacity=" + writeCapacity + ", devices=" + devices
                    + "]";
        }
    }

    /** A remote client's end of a connection: a map key (CONN lines), so equal by address and port. */
    static final class Endpoint {
        private final InetAddress address;
        private final int port;

        Endpoint(InetAddress address, int port) {
            this.address = address;
            this.port = port;
        }

        InetAddress address() {
            return address;
        }

        int port() {
            return port;
        }

        @Override
        public boolean equals(Object o) {
            if (!(o instanceof Endpoint)) {
                return false;
            }
            Endpoint other = (Endpoint) o;
            return port == other.port && Objects.equals(address, other.address);
        }

        @Override
        public int hashCode() {
            return Objects.hash(address, port);
        }

        @Override
        public String toString() {
            return "Endpoint[address=" + address + ", port=" + port + "]";
        }
    }

    static Policy initial(Shares defaults) {
        return new Policy(-1, Node.NONE, defaults, Collections.<String, Shares>emptyMap(),
                Collections.<Long, String>emptyMap(), Collections.<Endpoint, String>emptyMap());
    }
}
