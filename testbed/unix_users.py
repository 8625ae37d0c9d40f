"""Unix users that tests and the demo make for their clients, removed afterwards whatever happens."""

import contextlib
import pwd
import subprocess
import uuid
from collections.abc import Iterator

from testbed.local_cluster import LocalUser


@contextlib.contextmanager
def unix_users(names: list[str], uids: list[int] | None = None, shell: str = "/usr/sbin/nologin",
               user_group: bool = False) -> Iterator[list[pwd.struct_passwd]]:
    """`useradd` each name (with its uid, if given); `userdel` each one made, on the way out."""
    made = []
    try:
        for i, name in enumerate(names):
            argv = ["useradd", "--no-create-home", "--shell", shell, *(["--user-group"] if user_group else [])]
            if uids is not None:
                argv += ["--uid", str(uids[i])]
            subprocess.run([*argv, name], check=True, capture_output=True)
            made.append(name)
        yield [pwd.getpwnam(n) for n in names]
    finally:
        for name in made:
            subprocess.run(["userdel", name], capture_output=True)


def free_uids(count: int, start: int) -> list[int]:
    """`count` uids from `start` on that no passwd entry holds (another run may hold the first ones)."""
    free, uid = [], start
    while len(free) < count:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            free.append(uid)
        uid += 1
    return free


@contextlib.contextmanager
def local_users(prefix: str, priorities: tuple[int, ...], first_uid: int) -> Iterator[tuple[LocalUser, ...]]:
    """A new Unix user per priority (`prefix` and six hex digits, at free uids from `first_uid`: each
    test or benchmark takes its own range), as the LocalUsers a test bed serves; removed on the way out."""
    names = [f"{prefix}{uuid.uuid4().hex[:6]}" for _ in priorities]
    uids = free_uids(len(priorities), first_uid)
    with unix_users(names, uids):
        yield tuple(LocalUser(name, uid, priority) for name, uid, priority in zip(names, uids, priorities))
