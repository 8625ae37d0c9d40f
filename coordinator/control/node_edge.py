"""How a storage node's backend shares, as its agent said when it registered: what the work-conserving
step sends it (weights or caps) and whether it sees the node as one resource or one per device."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Edge:
    by_weight: bool         # False: it can only cap (blkio throttle without BFQ, io.max, Lustre TBF): sent caps
    per_node: bool = False  # one resource per direction for the whole node (the DataNode's scheduler)


CAPS_ONLY = Edge(by_weight=False)
