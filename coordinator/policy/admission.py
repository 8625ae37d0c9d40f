"""Admission of reservations: floors are promises, so together they must fit every device."""

from collections.abc import Mapping

from vnode_sync.errors import InvalidArgument


def check_admission(capacity: Mapping[str, float], reservations: Mapping[str, float]) -> None:
    """Reservations are promises: their sum must fit every node, or the new one is refused."""
    total = sum(reservations.values())
    for node, cap in capacity.items():
        if total > cap:
            raise InvalidArgument(f"reservations would total {total / 1e6:.1f} MB/s, more than node {node}'s "
                                  f"capacity {cap / 1e6:.1f} MB/s: refused")
