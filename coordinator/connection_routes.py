"""Which storage nodes a reported connection concerns, and each node's connection part, serialized.

A compute agent reports each connection with its storage end (server address and port, as the
compute node sees it). A node whose `endpoints` are configured gets only the connections to
those endpoints; a node without endpoints gets every connection, since nothing tells its
connections apart (the behaviour before connections named their storage end). A connection with
no storage end (from an older compute agent) goes to every node.

The parts are DesiredState field 7 (`connections`) entries, already serialized: appended to a
node's serialized desired state they are its connections (a repeated field is concatenated).
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from vnode_sync.coordinator.config import StorageNodeConfig
from vnode_sync.coordinator.serialized import field_entry
from vnode_sync.wire import vnode_pb2 as pb

_CONNECTIONS_FIELD = pb.DesiredState.DESCRIPTOR.fields_by_name["connections"].number


@dataclass(frozen=True)
class ConnectionParts:
    """Every node's connection part: `everything` for nodes without endpoints; for the others,
    `unaddressed` (connections naming no storage end) followed by their own `of_node` entries."""

    everything: bytes = b""
    unaddressed: bytes = b""
    of_node: dict[str, bytes] = field(default_factory=dict)


class ConnectionRoutes:
    def __init__(self, nodes: Sequence[StorageNodeConfig]):
        self._by_endpoint: dict[tuple[str, int], list[str]] = {}
        self._by_address: dict[str, list[str]] = {}
        self._unrouted = frozenset(n.node_id for n in nodes if not n.endpoints)  # get every connection
        for node in nodes:
            for address, port in node.endpoints:
                if port is None:
                    self._by_address.setdefault(address, []).append(node.node_id)
                else:
                    self._by_endpoint.setdefault((address, port), []).append(node.node_id)

    def nodes_of(self, connection: pb.ConnectionOwner) -> set[str]:
        """The nodes with endpoints that this connection's storage end matches (nodes without
        endpoints get it anyway)."""
        return {*self._by_endpoint.get((connection.server_address, connection.server_port), ()),
                *self._by_address.get(connection.server_address, ())}

    def parts(self, connections: Iterable[pb.ConnectionOwner]) -> ConnectionParts:
        everything, unaddressed, of_node = [], [], {}
        for connection in connections:
            entry = field_entry(_CONNECTIONS_FIELD, connection.SerializeToString())
            everything.append(entry)
            if not connection.server_address:
                unaddressed.append(entry)
                continue
            for node in self.nodes_of(connection):
                of_node.setdefault(node, []).append(entry)
        return ConnectionParts(b"".join(everything) if self._unrouted else b"", b"".join(unaddressed),
                               {node: b"".join(entries) for node, entries in of_node.items()})

    def part(self, parts: ConnectionParts, node_id: str) -> bytes:
        if node_id in self._unrouted:
            return parts.everything
        own = parts.of_node.get(node_id, b"")
        return parts.unaddressed + own if parts.unaddressed else own

    def changed(self, old: ConnectionParts, new: ConnectionParts) -> set[str] | None:
        """The nodes whose part differs; None means every node."""
        if old.unaddressed != new.unaddressed:
            return None
        nodes = {n for n in old.of_node.keys() | new.of_node.keys() if old.of_node.get(n) != new.of_node.get(n)}
        if old.everything != new.everything:
            nodes |= self._unrouted
        return nodes
