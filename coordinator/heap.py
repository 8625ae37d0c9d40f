"""The garbage collector tuned for the coordinator's heap: many long-lived streams, bursts of
short-lived objects at each change.

With CPython's default thresholds (700, 10, 10) a change fanned out to 10,000 streams, whose
writes are all in flight at once, ran many young collections and promoted the in-flight objects,
which then set off full collections of the whole heap (~1.5 million objects at 10,000 streams,
0.5-1 s each): about half of the coordinator's CPU per change at 10,000 agents
(benchmarks/results/coordinator-scale.md). A young collection every YOUNG_OBJECTS net allocations
lets a change's objects die young, by reference counting, before any collection sees them.
Objects alive once the coordinator serves (its configuration, snapshot, templates) are frozen:
full collections no longer walk them. Cyclic garbage is still collected, only less often.
"""

import gc

YOUNG_OBJECTS = 100_000   # the older generations keep CPython's thresholds (10 collections each)


def tune_for_streams() -> None:
    """Call once the coordinator serves, in its own process (it changes the whole process)."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_OBJECTS, older, oldest)
