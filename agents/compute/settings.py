"""The compute agent's `compute:` section, read by the one typed loader."""

from typing import Annotated

import annotated_types as at
from pydantic import AfterValidator

from vnode_sync.config_loading import Allowed, ListOf, Seconds, Settings

ENDPOINT_ALLOWED = "host:port or :port (any host), port 1-65535"


def _endpoint(text: str) -> str:
    host, _, port = text.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536 or (not host and not text.startswith(":")):
        raise ValueError(ENDPOINT_ALLOWED)
    return text


class ComputeSettings(Settings):
    """What the compute agent watches and how often."""

    storage_endpoints: Annotated[ListOf[Annotated[str, AfterValidator(_endpoint), Allowed(ENDPOINT_ALLOWED)]],
                                 at.MinLen(1)]
    """Storage endpoints whose connections are reported (the DataNodes' data port, e.g. ':9866')."""
    min_uid: Annotated[int, at.Ge(1), at.Le(2**32 - 2)] = 1000
    """Lowest uid that is a user: system accounts and root are never reported or placed (Debian's 1000)."""
    connection_seconds: Seconds = 0.1
    """How often connections are looked at: a new connection's bytes go to the storage node's
    default VNode until its owner arrives there, so this is short."""
    placement_seconds: Seconds = 1.0
    """How often job processes are placed."""

    @property
    def endpoints(self) -> tuple[tuple[str | None, int], ...]:
        """(host or None for any, port) of each storage endpoint."""
        return tuple((text.rpartition(":")[0].strip("[]") or None, int(text.rpartition(":")[2]))
                     for text in self.storage_endpoints)
