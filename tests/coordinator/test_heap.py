"""The coordinator's collector tuning, in a process of its own (it changes the whole process)."""

import subprocess
import sys

from vnode_sync.coordinator.heap import YOUNG_OBJECTS


def test_tuning_freezes_what_is_alive_and_collects_young_objects_less_often():
    code = ("import gc; from vnode_sync.coordinator.heap import tune_for_streams; before = gc.get_threshold(); "
            "tune_for_streams(); print(gc.get_freeze_count() > 0, before[1:] == gc.get_threshold()[1:], "
            "gc.get_threshold()[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True", str(YOUNG_OBJECTS)]
