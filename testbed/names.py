"""Names for what tests, demos and benchmarks create: unique per run, found again by prefix."""

import os
import uuid

TEST_PREFIX = "vnode-sync-test"


def unique_name(kind: str = "run") -> str:
    """A name no parallel or earlier crashed run uses; leftovers are found by TEST_PREFIX."""
    return f"{TEST_PREFIX}.{kind}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
