"""A cap-only node's caps: the step's allocation plus the room left, at least a probe, at most the limit."""

import math

import numpy as np
import pytest

from vnode_sync.coordinator.policy.caps import caps

MB = 1e6


def test_caps_add_the_room_left_keep_a_probe_and_stop_at_the_limit():
    allocation = np.array([[40 * MB, 5 * MB], [0.0, 10 * MB], [20 * MB, 0.0]])
    capacity = np.array([60 * MB, 60 * MB])
    got = caps(allocation, capacity, np.array([8.0, 1.0, 4.0]), np.array([math.inf, math.inf, 30 * MB]), 0.03)
    # resource 0 is full: caps are the allocation, the idle user its probe (3 % of 60; 1/13 is more)
    assert got[:, 0] == pytest.approx([40 * MB, 1.8 * MB, 20 * MB])
    # resource 1 has 45 left: everyone may grow into it, the limited user only to 30
    assert got[:, 1] == pytest.approx([50 * MB, 55 * MB, 30 * MB])
