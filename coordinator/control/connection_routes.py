"""Which storage nodes a reported connection concerns, and each node's connection part, serialized.

A compute agent reports each connection with its storage end (server address and port, as the
compute node sees it). A node whose `endpoints` are configured gets only the connections to
those endpoints; a node without endpoints gets every connection, since nothing tells its
connections apart.

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
    """Every node's connection part: `everything` for nodes without endpoints, `of_node` for the others."""

    everything: bytes = b""
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
        everything, of_node = [], {}
        for connection in connections:
            entry = field_entry(_CONNECTIONS_FIELD, connection.SerializeToString())
            everything.append(entry)
            for node in self.nodes_of(connection):
                of_node.setdefault(node, []).append(entry)
        return ConnectionParts(b"".join(everything) if self._unrouted else b"",
                               {node: b"".join(entries) for node, entries in of_node.items()})

    def part(self, parts: ConnectionParts, node_id: str) -> bytes:
        if node_id in self._unrouted:
            return parts.everything
        return parts.of_node.get(node_id, b"")

    def changed(self, old: ConnectionParts, new: ConnectionParts) -> set[str]:
        """The nodes whose part differs."""
        nodes = {n for n in old.of_node.keys() | new.of_node.keys() if old.of_node.get(n) != new.of_node.get(n)}
        if old.everything != new.everything:
            nodes |= self._unrouted
        return nodes
