"""The testbed's MIT Kerberos KDC (testbed/kdc.py): a realm of the run's own, principals, keytabs and
ticket caches, and nothing left behind."""

import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

from tests.conftest import unique_name
from testbed.kdc import MitKdc, Owner, kdc_processes, missing_tools, realm_for, take_down

needs_krb5 = pytest.mark.skipif(bool(missing_tools()) or os.geteuid() != 0,
                                reason=f"needs root and MIT Kerberos ({', '.join(missing_tools()) or 'present'}); "
                                       "run scripts/setup.d/hdfs.sh")


def test_the_realm_carries_the_run_name():
    assert realm_for("vnode-sync-test.krb.4711.ab12") == "VNODE-SYNC-TEST.KRB.4711.AB12"
    with pytest.raises(Exception, match="gives no realm"):
        realm_for("..")


def test_principal_names_that_could_reach_kadmin_as_commands_are_refused(tmp_path):
    kdc = MitKdc(str(tmp_path / "kdc"), "R.TEST")
    assert kdc.principal("alice") == "alice@R.TEST"
    assert kdc.principal("nn/localhost") == "nn/localhost@R.TEST"
    for bad in ("alice bob", "alice@OTHER", "-q", "a;b", "../x", ""):
        with pytest.raises(Exception, match="principal name"):
            kdc.principal(bad)


@needs_krb5
def test_a_user_gets_a_ticket_from_its_keytab_and_the_kdc_leaves_nothing_behind():
    # Not tmp_path: the user must reach krb5.conf, and pytest's base dir is root's alone.
    run = pathlib.Path(tempfile.mkdtemp(prefix=unique_name("kdc") + "."))
    user_dir = run / "alice"
    user_dir.mkdir()
    os.chown(user_dir, 64_991, 64_991)
    os.chmod(run, 0o755)
    kdc = MitKdc(str(run / "kdc"), realm_for(run.name)).start()
    try:
        keytab = kdc.add_principal("alice", str(user_dir / "keytab"), Owner(64_991, 64_991))
        assert os.stat(keytab).st_uid == 64_991 and os.stat(keytab).st_mode & 0o777 == 0o600
        kdc.kinit("alice", keytab, str(user_dir / "ccache"), Owner(64_991, 64_991))
        listed = subprocess.run(["klist", "-e", "-c", str(user_dir / "ccache")], env=kdc.env(), capture_output=True,
                                text=True, check=True).stdout
        assert f"Default principal: alice@{kdc.realm}" in listed
        assert "aes256-cts-hmac-sha1-96" in listed and "aes128" not in listed, listed
        assert kdc_processes(kdc.directory)
    finally:
        kdc.stop()
        shutil.rmtree(run)
    assert not kdc_processes(kdc.directory)
    assert not os.path.exists(kdc.directory)
    assert take_down(kdc.directory) == []
