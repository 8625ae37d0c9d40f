"""Job events the coordinator has not acknowledged, kept on the compute node until it has.

At most one event per (job, node): a newer start or end replaces the older one, because
only the latest says whether the job runs here (a requeued Slurm job starts again under
the same id after its end).
"""

import dataclasses
import json
import logging
import os
import re

from vnode_sync.batch.jobs import JobEvent, JobPhase
from vnode_sync.durable import write_atomically

log = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class EventSpool:
    def __init__(self, directory: str):
        self.directory = directory

    def _path(self, job_id: str, node: str) -> str:
        return os.path.join(self.directory, f"{_UNSAFE.sub('_', node)}@{_UNSAFE.sub('_', job_id)}.json")

    def save(self, event: JobEvent) -> str:
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        path = self._path(event.job_id, event.node)
        record = {**dataclasses.asdict(event), "phase": event.phase.value}
        # Durable before the hook returns: a power loss must not lose an event the coordinator never got.
        write_atomically(path, json.dumps(record).encode(), mode=0o600)
        return path

    def forget(self, event: JobEvent) -> None:
        """Drop what is spooled for the event's job and node (the coordinator now knows better)."""
        try:
            os.unlink(self._path(event.job_id, event.node))
        except FileNotFoundError:
            pass

    def pending(self) -> list[JobEvent]:
        """Spooled events, oldest first; unreadable files are logged and skipped."""
        try:
            entries = [e for e in os.scandir(self.directory) if e.name.endswith(".json")]
        except FileNotFoundError:
            return []
        events = []
        for entry in sorted(entries, key=lambda e: e.stat().st_mtime_ns):
            try:
                with open(entry.path) as f:
                    record = json.load(f)
                events.append(JobEvent(**{**record, "phase": JobPhase(record["phase"])}))
            except (OSError, ValueError, TypeError, KeyError) as e:
                log.warning("spooled event %s is unreadable, skipping it: %s", entry.path, e)
        return events
