"""Logging set up in one place: plain or JSON lines, each tagged with the component and node."""

import json
import logging
import sys
import time


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)),
                 "level": record.levelname, "logger": record.name,
                 "component": getattr(record, "component", ""), "message": record.getMessage()}
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure(component: str, fmt: str = "plain", level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s [{component}] %(name)s: %(message)s"))

    def tag(record: logging.LogRecord) -> bool:
        record.component = component
        return True

    handler.addFilter(tag)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
