"""Transfer threads share the CPU by their users' weights on a real cgroup-v2 kernel: the qemu guest's boot
(tests/kernel/conftest.py) runs tests/kernel/test_cpu_v2.py against its cgroup2 (in the pytest step that
test_io_v2_guest.py checks) and tests/kernel/guest_cpu_weights.py, whose two users' busy threads, moved by the
storage agent's CpuShares into threaded cpu groups at weights 2:1, must split the guest's CPU 2:1 within 10 %."""

import re


def test_two_users_threads_split_the_cpu_by_their_weights_within_10_percent(guest_run):
    assert "CPU_V2_RC=0" in guest_run.output, guest_run.output
    measured = re.search(r"CPU_V2 .*without groups .* ratio=([0-9.]+);.* ratio=([0-9.]+) over", guest_run.output)
    assert measured, guest_run.output
    without, weighed = map(float, measured.groups())
    assert abs(without - 1) <= 0.10 and abs(weighed / 2 - 1) <= 0.10, measured.group(0)
