"""Admin commands on the coordinator's state file, run on purpose with the coordinator stopped:
`init` makes a new store (seeded from the YAML), `backup PATH` copies it, `restore PATH` puts a
checked copy back. Each takes the state file's lock, so none runs beside a serving coordinator."""

import logging
import os
import shutil

from vnode_sync.coordinator.config import CoordinatorConfig
from vnode_sync.coordinator.state.store import StateStore, StoreUnusable, lock_state_file
from vnode_sync.durable import replace_durably

log = logging.getLogger(__name__)

STORE_COMMANDS = ("init", "backup", "restore")


def _remove_store_files(path: str, suffixes: tuple[str, ...] = ("", "-wal", "-shm")) -> None:
    for suffix in suffixes:
        if os.path.exists(path + suffix):
            os.remove(path + suffix)


def init_store(config: CoordinatorConfig, path: str, force: bool) -> str:
    if os.path.exists(path) and os.path.getsize(path) > 0 and not force:
        raise StoreUnusable(f"state file {path} exists; `init` would replace it (back it up, then add --force)")
    lock = lock_state_file(path)
    try:
        _remove_store_files(path)
    finally:
        os.close(lock)
    store = StateStore(path, seed_users=config.users)
    try:
        return f"initialised {path}: store {store.store_id():x}, generation {store.generation()}"
    finally:
        store.close()


def backup_store(path: str, target: str) -> str:
    store = StateStore(path, create=False)
    try:
        store.backup(target)
        return f"backed up {path} (store {store.store_id():x}, generation {store.generation()}) to {target}"
    finally:
        store.close()


def restore_store(path: str, source: str) -> str:
    checked = StateStore(source, create=False)  # refuses a damaged or empty backup
    try:
        store_id, generation = checked.store_id(), checked.generation()
    finally:
        checked.close()
        if os.path.exists(source + ".lock"):
            os.remove(source + ".lock")
    lock = lock_state_file(path)
    try:
        shutil.copyfile(source, path + ".restoring")
        # The old store's journal must not be replayed into the restored one; the rename is the switch.
        _remove_store_files(path, suffixes=("-wal", "-shm"))
        replace_durably(path + ".restoring", path)
    finally:
        os.close(lock)
    return f"restored {path} from {source}: store {store_id:x}, generation {generation}"


def run_store_command(config: CoordinatorConfig, state_path: str, command: str, target: str | None,
                      force: bool = False) -> str:
    """One admin command; returns the line to print. Raises VNodeSyncError with a one-line message."""
    if command == "init":
        return init_store(config, state_path, force)
    if not target:
        raise StoreUnusable(f"`{command}` needs a PATH")
    if command == "backup":
        return backup_store(state_path, target)
    return restore_store(state_path, target)
