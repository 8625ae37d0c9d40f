"""The weight step's compiled passes: each works only its block of columns and gives what numpy would."""

import subprocess
import sys

import numpy as np
import pytest

from vnode_sync.coordinator.policy import compiled_passes


@pytest.fixture
def arrays():
    rng = np.random.default_rng(5)
    new, old = (rng.uniform(0, 10, (6, 9)).astype(np.float32) for _ in range(2))
    ceiling = rng.uniform(2, 8, (6, 9)).astype(np.float32)
    floor = np.minimum(ceiling, rng.uniform(0, 3, (6, 9))).astype(np.float32)
    return new, old, ceiling, floor


@pytest.mark.parametrize("with_floor", [False, True])
def test_the_overshoot_stays_within_floor_and_ceiling_on_its_block_and_sums_it(arrays, with_floor):
    new, old, ceiling, floor = arrays
    floor = floor if with_floor else None
    out = np.full_like(new, -1.0)
    sums = compiled_passes.overshoot(new, old, 0.7, ceiling, floor, out, 2, 7)
    want = np.clip(new + np.float32(0.7) * (new - old), 0 if floor is None else floor, ceiling)[:, 2:7]
    assert out[:, 2:7] == pytest.approx(want, rel=1e-6)
    assert sums == pytest.approx(want.sum(axis=1), rel=1e-6)
    assert (out[:, :2] == -1).all() and (out[:, 7:] == -1).all()


def test_the_response_scales_each_user_on_its_block_and_keeps_its_least_weight(arrays):
    given = arrays[0]
    scale = np.linspace(0.1, 1, 6).astype(np.float32)
    least = np.full(6, 2.0, dtype=np.float32)
    out = np.full_like(given, -1.0)
    compiled_passes.respond(given, scale, least, out, 3, 9)
    assert out[:, 3:] == pytest.approx(np.maximum(given * scale[:, None], 2.0)[:, 3:])
    assert (out[:, :3] == -1).all()


def test_a_fill_writes_only_its_block_and_returns_its_levels_and_per_user_sums():
    weight = np.array([[4.0, 1.0, 1.0], [8.0, 1.0, 3.0]])
    ceiling = np.full((2, 3), 60.0)
    out = np.full_like(weight, -1.0)
    levels, sums = compiled_passes.fill(weight, np.array([60.0, 60.0, 60.0]), ceiling, None, None, out, 1, 3,
                                        1e-6, 60)
    assert out[:, 1:] == pytest.approx(np.array([[30, 15], [30, 45]]), rel=1e-5)
    assert levels == pytest.approx([30, 15], rel=1e-5)
    assert sums == pytest.approx([45, 75], rel=1e-5)
    assert (out[:, 0] == -1).all()


SIGNATURES_AFTER_COMPILING = """
from numba import types
from vnode_sync.coordinator.policy import compiled_passes
from vnode_sync.coordinator.policy.local_weights import compile_passes
compile_passes()
for name, floor_at in (("fill", 3), ("overshoot", 4), ("respond", 2)):
    for sig in getattr(compiled_passes, name).signatures:
        print(name, sig[0].dtype, isinstance(sig[floor_at], types.NoneType))
"""


def test_compiling_at_start_covers_what_the_control_loop_runs_float32_with_floors_and_without():
    # A fresh process: this one's kernels are compiled already by the other tests.
    out = subprocess.run([sys.executable, "-c", SIGNATURES_AFTER_COMPILING], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    for line in ("fill float32 True", "fill float32 False", "overshoot float32 True", "overshoot float32 False",
                 "respond float32 False"):
        assert line in out, out
