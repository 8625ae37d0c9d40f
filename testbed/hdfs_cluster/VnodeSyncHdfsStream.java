import java.net.InetSocketAddress;
import java.net.URI;
import java.security.PrivilegedExceptionAction;
import java.util.Arrays;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.BlockLocation;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.security.UserGroupInformation;

/** Streams one HDFS file through the native client; prints {"bytes", "seconds", "bytes_per_second"}. */
public class VnodeSyncHdfsStream {
    static final int CHUNK = 1 << 20;

    public static void main(String[] args) throws Exception {
        // A remote user needs no OS login, so a uid without a passwd entry works (UnixLoginModule fails there).
        String hdfsUser = System.getenv("HADOOP_USER_NAME");
        UserGroupInformation ugi = hdfsUser != null ? UserGroupInformation.createRemoteUser(hdfsUser)
                                                    : UserGroupInformation.getCurrentUser();
        ugi.doAs((PrivilegedExceptionAction<Void>) () -> { run(args); return null; });
    }

    // read URI PATH SECONDS | write URI PATH BYTES REPLICATION [HOST:PORT] | put URI PATH LOCAL
    // | probe URI PATH REPLICATION | reads URI GAP_SECONDS PATH... | writes URI GAP_SECONDS BYTES PATH...
    static void run(String[] args) throws Exception {
        DistributedFileSystem fs = (DistributedFileSystem) FileSystem.get(new URI(args[1]), new Configuration());
        if (args[0].equals("reads") || args[0].equals("writes")) {
            interactive(fs, args);
            return;
        }
        Path path = new Path(args[2]);
        byte[] chunk = new byte[CHUNK];
        long start = System.nanoTime();
        long bytes;
        switch (args[0]) {
            case "read": bytes = read(fs, path, Double.parseDouble(args[3]), chunk); break;
            case "write": bytes = write(fs, path, Long.parseLong(args[3]), Short.parseShort(args[4]),
                                        args.length > 5 ? args[5] : null, chunk); break;
            case "put":
                fs.copyFromLocalFile(false, true, new Path(args[3]), path);
                bytes = fs.getFileStatus(path).getLen();
                break;
            case "probe": bytes = probe(fs, path, Short.parseShort(args[3]), chunk); break;
            default: throw new IllegalArgumentException("mode must be read, write, put or probe, not " + args[0]);
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        System.out.printf("{\"bytes\": %d, \"seconds\": %.3f, \"bytes_per_second\": %.1f}%n",
                          bytes, seconds, bytes / seconds);
    }

    /**
     * An interactive user: one file after another (read whole, or written with BYTES), idle GAP_SECONDS
     * between them, in one JVM (so no file pays for a JVM start); one JSON line per file, as it is done.
     */
    static void interactive(DistributedFileSystem fs, String[] args) throws Exception {
        boolean writes = args[0].equals("writes");
        double gap = Double.parseDouble(args[2]);
        long size = writes ? Long.parseLong(args[3]) : 0;
        byte[] chunk = new byte[CHUNK];
        long[] phases = new long[3];
        for (int i = writes ? 4 : 3; i < args.length; i++) {
            Path path = new Path(args[i]);
            long start = System.nanoTime();
            long bytes = writes ? write(fs, path, size, fs.getDefaultReplication(path), null, chunk, phases)
                                : read(fs, path, 0, chunk);
            double seconds = (System.nanoTime() - start) / 1e9;
            String split = !writes ? "" : String.format(", \"phases\": {\"create\": %.4f, \"write\": %.4f, \"close\": %.4f}",
                    (phases[0] - start) / 1e9, (phases[1] - phases[0]) / 1e9, (phases[2] - phases[1]) / 1e9);
            System.out.printf("{\"bytes\": %d, \"seconds\": %.4f, \"bytes_per_second\": %.1f%s}%n",
                              bytes, seconds, bytes / seconds, split);
            System.out.flush();
            Thread.sleep((long) (gap * 1000));
        }
    }

    /** Reads the file once, or for SECONDS (re-opening it at its end) if SECONDS > 0. */
    static long read(FileSystem fs, Path path, double seconds, byte[] chunk) throws Exception {
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        long total = 0;
        do {
            try (FSDataInputStream in = fs.open(path, CHUNK)) {
                for (int n; (n = in.read(chunk)) > 0; ) {
                    total += n;
                    if (seconds > 0 && System.nanoTime() >= deadline) return total;
                }
            }
        } while (seconds > 0 && System.nanoTime() < deadline);
        return total;
    }

    /** Writes BYTES of incompressible data from memory; FAVORED names a DataNode's data address. */
    static long write(DistributedFileSystem fs, Path path, long size, short replication, String favored,
                      byte[] chunk) throws Exception {
        return write(fs, path, size, replication, favored, chunk, new long[3]);
    }

    /**
     * The same, with when (System.nanoTime) the file was created, its last byte handed to the stream,
     * and the stream closed (every packet acknowledged and the file completed at the NameNode) into PHASES.
     */
    static long write(DistributedFileSystem fs, Path path, long size, short replication, String favored,
                      byte[] chunk, long[] phases) throws Exception {
        new Random(path.toString().hashCode()).nextBytes(chunk);
        InetSocketAddress[] favoredNodes = null;
        if (favored != null) {
            String[] hostPort = favored.split(":");
            favoredNodes = new InetSocketAddress[] {new InetSocketAddress(hostPort[0], Integer.parseInt(hostPort[1]))};
        }
        FsPermission permission = FsPermission.getFileDefault().applyUMask(FsPermission.getUMask(fs.getConf()));
        long written = 0;
        try (FSDataOutputStream out = fs.create(path, permission, true, CHUNK, replication,
                                                fs.getDefaultBlockSize(path), null, favoredNodes)) {
            phases[0] = System.nanoTime();
            while (written < size) {
                int n = (int) Math.min(CHUNK, size - written);
                out.write(chunk, 0, n);
                written += n;
            }
            phases[1] = System.nanoTime();
        }
        phases[2] = System.nanoTime();
        return written;
    }

    /** Writes one chunk to REPLICATION DataNodes, reads it back, compares and deletes it. */
    static long probe(DistributedFileSystem fs, Path path, short replication, byte[] chunk) throws Exception {
        write(fs, path, CHUNK, replication, null, chunk);
        BlockLocation[] blocks = fs.getFileBlockLocations(path, 0, CHUNK);
        if (blocks.length != 1 || blocks[0].getNames().length != replication) {
            throw new IllegalStateException("probe block has replicas on " + Arrays.toString(blocks[0].getNames())
                                            + ", wanted " + replication + " DataNodes");
        }
        byte[] back = new byte[CHUNK];
        try (FSDataInputStream in = fs.open(path)) {
            in.readFully(0, back);
        }
        if (!Arrays.equals(chunk, back)) throw new IllegalStateException("probe read back other bytes");
        fs.delete(path, false);
        return 2L * CHUNK;
    }
}
