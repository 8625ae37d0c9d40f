"""The BFQ split benchmark's tunable sets, as it reads them from its command line."""

import pytest

from benchmarks.bfq_split import tunables
from vnode_sync.errors import InvalidArgument
from vnode_sync.kernel.disk_queue import QueueSetting


def test_a_set_names_bfqs_tunables_and_the_queues_request_size():
    assert tunables("timeout_sync=20,max_budget=65536,max_sectors_kb=512") == [
        QueueSetting("iosched/timeout_sync", "20"), QueueSetting("iosched/max_budget", "65536"),
        QueueSetting("max_sectors_kb", "512")]
    assert tunables("") == []


@pytest.mark.parametrize("text", ["timeout_sync", "../../power/state=mem", "timeout_sync=20;reboot"])
def test_a_set_with_an_odd_setting_is_refused_before_any_write(text):
    with pytest.raises(InvalidArgument, match="queue setting"):
        tunables(text)
