"""The io-v2 backend on a real cgroup-v2 kernel: one qemu guest boot runs tests/kernel/test_io_v2.py
against the guest's cgroup2, measures an io.max read cap set through the backend, runs the storage
agent's reconcile pass against a real process serving two users, and then a real vnode-coordinator
and vnode-agent (io-v2) against such a process (the boot: tests/kernel/conftest.py)."""

import re


def test_io_v2_backend_tests_pass_on_the_real_kernel(guest_run):
    assert "PYTEST_RC=0" in guest_run.output, guest_run.output
    summary = re.search(r"^(\d+) passed in", guest_run.output, re.M)
    assert summary and "skipped" not in guest_run.output, guest_run.output  # the real-kernel half ran too


def test_io_max_read_cap_holds_within_10_percent(guest_run):
    assert "IO_MAX_RC=0" in guest_run.output, guest_run.output
    assert re.search(r"IO_MAX cap=5000000 measured=\d+ ratio=", guest_run.output)


def test_the_agent_refuses_to_move_a_process_serving_two_users_and_says_why(guest_run):
    assert "SHARED_OK" in guest_run.output, guest_run.output
    assert re.search(r"SHARED reason: process \d+ serves several users .* not moved", guest_run.output)


def test_a_storage_agent_process_refuses_to_move_a_process_serving_two_users_and_says_why(guest_run):
    """Real coordinator and agent processes in the guest; the refusal is in the agent's log and in
    `vnodectl status`, and the process stays in its own cgroup."""
    assert "AGENT_REFUSAL_OK" in guest_run.output, guest_run.output
    assert re.search(r"AGENT_REFUSAL status: process \d+ serves several users \(hdfs handlers; seen so far: "
                     r"alice, bob\): io-v2 moves whole processes, so it is not moved", guest_run.output)
