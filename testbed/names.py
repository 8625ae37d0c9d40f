"""Names for what tests, demos and benchmarks create: unique per run, found again by prefix."""

import os
import subprocess
import uuid

TEST_PREFIX = "vnode-sync-test"


def crashed_run_name(kind: str = "run") -> str:
    """A run name whose owner pid has exited: what a crashed run's leftovers carry."""
    owner = subprocess.Popen(["true"])
    owner.wait()
    return f"{TEST_PREFIX}.{kind}.{owner.pid}.{uuid.uuid4().hex[:8]}"


def unique_name(kind: str = "run") -> str:
    """A name no parallel or earlier crashed run uses; leftovers are found by TEST_PREFIX."""
    return f"{TEST_PREFIX}.{kind}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
