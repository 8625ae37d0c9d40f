"""Unix users that tests and the demo make for their clients, removed afterwards whatever happens."""

import contextlib
import pwd
import subprocess
from collections.abc import Iterator


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
