package org.vnodesync.dnthrottle;

/** A block device's MAJ:MIN, as /proc/diskstats prints it. */
record DeviceId(int major, int minor) {
    @Override
    public String toString() {
        return major + ":" + minor;
    }
}
