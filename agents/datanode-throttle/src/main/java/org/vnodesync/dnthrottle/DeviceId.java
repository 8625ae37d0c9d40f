package org.vnodesync.dnthrottle;

/** A block device's MAJ:MIN, as /proc/diskstats prints it; equal by both (looked up in lists). */
final class DeviceId {
    private final int major;
    private final int minor;

    DeviceId(int major, int minor) {
        this.major = major;
        this.minor = minor;
    }

    int major() {
        return major;
    }

    int minor() {
        return minor;
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof DeviceId)) {
            return false;
        }
        DeviceId other = (DeviceId) o;
        return major == other.major && minor == other.minor;
    }

    @Override
    public int hashCode() {
        return 31 * major + minor;
    }

    @Override
    public String toString() {
        return major + ":" + minor;
    }
}
