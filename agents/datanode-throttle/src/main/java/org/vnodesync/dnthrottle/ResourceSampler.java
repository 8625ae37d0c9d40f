package org.vnodesync.dnthrottle;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * How busy the node's CPUs and data disks were since the last sample: /proc/stat's first line (time
 * not idle and not waiting for I/O, over all time) and /proc/diskstats' io_ticks (ms with I/O in
 * flight) of each data device; and what the data devices wrote (diskstats' sectors written). Read by
 * one thread; a file it cannot read counts as idle.
 */
final class ResourceSampler {
    /** One sample's answer: fractions 0..1 since the previous sample, and the data disks' writes in bytes/s. */
    static final class Busy {
        private final double cpu;
        private final double disk;
        private final double writtenBps;

        Busy(double cpu, double disk, double writtenBps) {
            this.cpu = cpu;
            this.disk = disk;
            this.writtenBps = writtenBps;
        }

        double cpu() {
            return cpu;
        }

        double disk() {
            return disk;
        }

        double writtenBps() {
            return writtenBps;
        }

        double busiest() {
            return Math.max(cpu, disk);
        }
    }

    private final Path proc;
    private volatile List<DeviceId> devices = Collections.emptyList();
    private long lastCpuBusy = -1;
    private long lastCpuTotal = -1;
    private long[] lastTicks = new long[0];
    private long[] lastSectors = new long[0];
    private long lastNs;

    ResourceSampler(Path proc) {
        this.proc = proc;
    }

    /** The data devices whose io_ticks count (from the storage agent's APPLY). */
    void devices(List<DeviceId> next) {
        devices = Collections.unmodifiableList(new ArrayList<>(next));
    }

    Busy sample(long nowNs) {
        double cpu = cpu();
        Disks disks = disks(nowNs);
        lastNs = nowNs;
        return new Busy(cpu, disks.busiest(), disks.writtenBps());
    }

    private double cpu() {
        String line;
        try {
            line = Files.readAllLines(proc.resolve("stat"), StandardCharsets.US_ASCII).get(0);
        } catch (IOException | RuntimeException e) {
            return 0;
        }
        String[] f = line.trim().split("\\s+");
        if (f.length < 5 || !f[0].equals("cpu")) {
            return 0;
        }
        long total = 0;
        long idle = 0;
        for (int i = 1; i < f.length && i <= 8; i++) {  // user nice system idle iowait irq softirq steal
            long value = Long.parseLong(f[i]);
            total += value;
            if (i == 4 || i == 5) {
                idle += value;
            }
        }
        long busy = total - idle;
        double fraction = 0;
        if (lastCpuTotal >= 0 && total > lastCpuTotal) {
            fraction = (double) (busy - lastCpuBusy) / (total - lastCpuTotal);
        }
        lastCpuBusy = busy;
        lastCpuTotal = total;
        return Math.max(0, Math.min(1, fraction));
    }

    /** The busiest data disk's busy fraction and what the data disks wrote (bytes/s) since the last sample. */
    private static final class Disks {
        private final double busiest;
        private final double writtenBps;

        Disks(double busiest, double writtenBps) {
            this.busiest = busiest;
            this.writtenBps = writtenBps;
        }

        double busiest() {
            return busiest;
        }

        double writtenBps() {
            return writtenBps;
        }

        static final Disks IDLE = new Disks(0, 0);
    }

    private Disks disks(long nowNs) {
        List<DeviceId> wanted = devices;
        long[] ticks = new long[wanted.size()];
        long[] sectors = new long[wanted.size()];
        java.util.Arrays.fill(ticks, -1);
        if (!wanted.isEmpty()) {
            try {
                for (String line : Files.readAllLines(proc.resolve("diskstats"), StandardCharsets.US_ASCII)) {
                    String[] f = line.trim().split("\\s+");
                    if (f.length < 13) {
                        continue;
                    }
                    int index = wanted.indexOf(new DeviceId(Integer.parseInt(f[0]), Integer.parseInt(f[1])));
                    if (index >= 0) {
                        ticks[index] = Long.parseLong(f[12]);
                        sectors[index] = Long.parseLong(f[9]);
                    }
                }
            } catch (IOException | RuntimeException e) {
                return Disks.IDLE;
            }
        }
        double busiest = 0;
        double written = 0;
        if (lastTicks.length == ticks.length && nowNs > lastNs) {
            double ms = (nowNs - lastNs) / 1e6;
            for (int i = 0; i < ticks.length; i++) {
                if (ticks[i] >= 0 && lastTicks[i] >= 0) {
                    busiest = Math.max(busiest, (ticks[i] - lastTicks[i]) / ms);
                    written += Math.max(0, sectors[i] - lastSectors[i]) * 512.0 / (ms / 1e3);
                }
            }
        }
        lastTicks = ticks;
        lastSectors = sectors;
        return new Disks(Math.max(0, Math.min(1, busiest)), written);
    }
}
