package org.vnodesync.dnthrottle;

import java.io.IOException;
import java.util.OptionalLong;

/** Finds the Unix owner of the client end of a TCP connection made on this host. */
interface OwnerLookup {
    /** The uid owning the socket bound to CLIENT and connected to SERVER (SERVER may be null: any peer). */
    OptionalLong ownerOf(Policy.Endpoint client, Policy.Endpoint server) throws IOException;
}
