"""The batch spool after a power loss, on a real kernel: the guest puts the spool on ext4 over
dm-flakey and drops every write not on the disk when the power goes (guest_spool_power_loss.py;
the boot is shared, tests/kernel/conftest.py). A spooled job event survives; an event written as the
spool wrote it before (no fsync) is lost, so the stand-in loses what is not durable."""

import re


def test_a_spooled_event_survives_a_power_loss_and_an_unsynced_one_does_not(guest_run):
    output = guest_run.output
    assert "POWER_LOSS_RC=0" in output, output[-3000:]
    assert re.search(r"POWER_LOSS before: jobs \['41', '42'\]; after: jobs \['41'\]; files \['cn1@41.json'\]",
                     output), output[-3000:]
    assert "POWER_LOSS durable event: kept" in output
    assert "POWER_LOSS unsynced control: dropped" in output, "a stand-in that loses nothing proves nothing"
