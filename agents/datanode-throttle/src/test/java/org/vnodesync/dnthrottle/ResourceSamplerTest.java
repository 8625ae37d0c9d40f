package org.vnodesync.dnthrottle;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The sampler against a /proc of our own: CPU and data disk busy fractions, and the data disks' writes. */
class ResourceSamplerTest {
    private static final String CPU_BEFORE = "cpu  100 0 100 700 100 0 0 0 0 0\n";
    private static final String CPU_AFTER = "cpu  150 0 150 750 150 0 0 0 0 0\n";   // 100 of 200 busy

    private static String disks(long sectorsWritten, long ioTicks) {
        // major minor name reads merged sectors ms writes merged sectors-written ms in-flight io-ticks ...
        return "   7       0 loop0 10 0 80 5 20 0 " + sectorsWritten + " 40 0 " + ioTicks + " 45 0 0 0 0\n"
                + "   7       1 loop1 10 0 80 5 20 0 999999 40 0 999999 45 0 0 0 0\n";   // not a data disk
    }

    @Test
    void itGivesTheBusiestDataDiskAndWhatTheDataDisksWrote(@TempDir Path proc) throws IOException {
        ResourceSampler sampler = new ResourceSampler(proc);
        sampler.devices(Arrays.asList(new DeviceId(7, 0)));
        Files.write(proc.resolve("stat"), CPU_BEFORE.getBytes(StandardCharsets.UTF_8));
        Files.write(proc.resolve("diskstats"), disks(1_000, 500).getBytes(StandardCharsets.UTF_8));
        sampler.sample(1_000_000_000L);
        Files.write(proc.resolve("stat"), CPU_AFTER.getBytes(StandardCharsets.UTF_8));
        // 6 MB and 80 ms in 100 ms
        Files.write(proc.resolve("diskstats"), disks(1_000 + 11_719, 580).getBytes(StandardCharsets.UTF_8));
        ResourceSampler.Busy busy = sampler.sample(1_100_000_000L);
        assertEquals(0.5, busy.cpu(), 1e-9);
        assertEquals(0.8, busy.disk(), 1e-9);
        assertEquals(11_719 * 512 / 0.1, busy.writtenBps(), 1);
    }

    @Test
    void aProcItCannotReadCountsAsIdleAndNothingWritten(@TempDir Path proc) throws IOException {
        ResourceSampler sampler = new ResourceSampler(proc);
        sampler.devices(Arrays.asList(new DeviceId(7, 0)));
        sampler.sample(1_000_000_000L);
        ResourceSampler.Busy busy = sampler.sample(1_100_000_000L);
        assertEquals(0, busy.cpu());
        assertEquals(0, busy.disk());
        assertEquals(0, busy.writtenBps());
        Files.write(proc.resolve("diskstats"), disks(1_000, 500).getBytes(StandardCharsets.UTF_8));
        sampler.sample(1_200_000_000L);
        Files.write(proc.resolve("diskstats"), disks(2_000, 550).getBytes(StandardCharsets.UTF_8));
        assertEquals(1_000 * 512 / 0.1, sampler.sample(1_300_000_000L).writtenBps(), 1);
        Files.delete(proc.resolve("diskstats"));
        assertEquals(0, sampler.sample(1_400_000_000L).writtenBps(), "gone: nothing known written, not the last rate");
    }
}
