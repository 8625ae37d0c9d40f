package org.vnodesync.dnthrottle;

/** Which way the bytes of an op flow, seen from the DataNode. */
enum Direction {
    READ, WRITE
}
