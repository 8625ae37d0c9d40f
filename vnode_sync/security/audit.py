"""The audit log: the "vnode_sync.audit" logger (who, what, old and new value), optionally also a file."""

import logging
import os

AUDIT_LOGGER = "vnode_sync.audit"


def send_audit_to(path: str) -> logging.Handler:
    """Append audit lines to `path` (mode 0640) as well as to the component's log."""
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
    os.close(fd)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logging.getLogger(AUDIT_LOGGER).addHandler(handler)
    return handler
