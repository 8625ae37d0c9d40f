"""The coordinator and the agents start without numpy: it comes with the weight step, which only a
work-conserving coordinator loads (coordinator/cluster.py). A static-shares site does not pay for it,
and the cgroup-v2 qemu guest, whose emulated CPU lacks instructions numpy's wheels use, runs both
(an import of it there dies with SIGILL: tests/kernel/test_io_v2_guest.py)."""

import subprocess
import sys

ENTRY_POINTS = ["vnode_sync.coordinator.main", "vnode_sync.coordinator.api.server", "vnode_sync.agents.main"]


def test_the_coordinator_and_the_agents_import_without_numpy():
    probe = f"import sys; import {', '.join(ENTRY_POINTS)}; print(sorted(m for m in sys.modules if m.split('.')[0] == 'numpy')[:3])"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert loaded.stdout.strip() == "[]", loaded.stdout


def test_the_coordinator_and_the_agents_import_without_cryptography_or_prometheus_client():
    """cryptography (certificate checks) and prometheus_client (metrics) load only where TLS or metrics
    are configured: each takes seconds to import on a slow CPU, such as the qemu guest's, which starts
    both in plaintext without metrics."""
    probe = (f"import sys; import {', '.join(ENTRY_POINTS)}; "
             "print(sorted({'cryptography', 'prometheus_client'} & set(sys.modules)))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert loaded.stdout.strip() == "[]", loaded.stdout
