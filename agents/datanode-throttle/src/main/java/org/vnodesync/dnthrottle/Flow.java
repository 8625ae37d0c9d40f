package org.vnodesync.dnthrottle;

/**
 * One user's traffic at one volume's Dispatcher: its finish tag. Made when the user's first op reaches
 * the volume, never per packet; guarded by that dispatcher's lock.
 */
final class Flow {
    final Throttles.Charge charge;
    double finish;   // virtual finish tag of its last packet tagged by weight
    long interval;   // the dispatcher's interval in which it last asked or had a packet dispatched

    Flow(Throttles.Charge charge) {
        this.charge = charge;
    }
}
