"""Files replaced atomically and durably: after a crash or a power loss, a reader finds the old
content or the new, never a mix, an empty file or nothing where the old file was.

The steps are the ones every POSIX file system needs (SQLite's "Atomic Commit", ext4's
`auto_da_alloc` notes): write a temporary file in the same directory, fsync it, rename it over
the target, fsync the directory so the rename itself survives a power loss.
"""

import os
import tempfile


def fsync_directory(directory: str) -> None:
    """Make the directory's entries (a rename, a new or removed file) durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(temporary: str, path: str) -> None:
    """Put the finished file `temporary` (same directory as `path`) in place of `path`, durably."""
    fd = os.open(temporary, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    fsync_directory(os.path.dirname(os.path.abspath(path)))


def write_atomically(path: str, data: bytes, mode: int = 0o644) -> None:
    """Replace `path` with `data` (permissions `mode`, whatever the umask): all of it or none.

    The temporary file has a unique name, so two writers of the same path never mix their bytes;
    one killed before its rename leaves a `.<name>.*.tmp` file beside `path`, never a partial `path`.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
    fsync_directory(directory)
