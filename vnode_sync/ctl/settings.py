"""vnodectl's own config file (/etc/vnode-sync/vnodectl.yaml), read by the one typed loader.

Example:
    coordinator: coord.example.org:7070
    tls: {ca: /etc/vnode-sync/ca.crt, cert: ~/.vnode-sync/admin.crt, key: ~/.vnode-sync/admin.key}
"""

import os

from vnode_sync.config_loading import load
from vnode_sync.security.tls import SecuredSettings

DEFAULT_PATH = "/etc/vnode-sync/vnodectl.yaml"


class CtlSettings(SecuredSettings):
    """Where vnodectl finds the coordinator and with which certificate; flags and $VNODE_* win."""

    coordinator: str = ""
    """host:port of the coordinator; "": 127.0.0.1:7070, a coordinator on this host. Several coordinators
    (docs/ha.md): their addresses comma-separated; calls go to the leader."""


def load_ctl_settings(path: str | None) -> CtlSettings:
    """`path`, else the default file if it exists, else all defaults."""
    path = path or (DEFAULT_PATH if os.path.exists(DEFAULT_PATH) else None)
    return load(path, CtlSettings) if path else CtlSettings()
