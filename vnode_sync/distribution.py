"""This installation of vnode-sync: its version (pyproject.toml's, the one version of every command,
the wheel and the DataNode agent's jar) and whether an extra's modules are here.

Run as `python -m vnode_sync.distribution [EXTRA...]` (the Ansible roles' install check): prints the
version; exits 1, naming what is missing, if an extra named is not installed.
"""

import importlib.metadata
import importlib.util
import sys
import tomllib
from pathlib import Path

DISTRIBUTION = "vnode-sync"
# The modules each extra of pyproject.toml brings, by import name (pure-sasl is imported as puresasl);
# tests/test_distribution.py checks them against the extra's requirements.
EXTRA_MODULES = {"coordinator": ("numpy", "numba", "kazoo", "puresasl")}


def _source_tree_version() -> str | None:
    """The version of the checkout this package runs from, if it does: that pyproject.toml is the truth
    there, whatever an older install's metadata on sys.path says."""
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    if not pyproject.is_file():
        return None
    with open(pyproject, "rb") as f:
        project = tomllib.load(f).get("project", {})
    return project.get("version") if project.get("name") == DISTRIBUTION else None


def version() -> str:
    """This vnode-sync's version: the checkout's pyproject.toml, else the installed wheel's metadata."""
    found = _source_tree_version()
    if found is not None:
        return found
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"   # neither a checkout nor installed (e.g. files copied by hand)


def missing_modules(extra: str) -> list[str]:
    """The modules of `extra` that cannot be imported here (none: the extra is installed)."""
    missing = []
    for name in EXTRA_MODULES[extra]:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):   # a blocked or half-removed module
            found = False
        if not found:
            missing.append(name)
    return missing


def extra_refusal(extra: str, command: str) -> str | None:
    """The one line a command that needs `extra` stops with where it is missing; None where it is here."""
    missing = missing_modules(extra)
    if not missing:
        return None
    return (f"{command}: error: {', '.join(missing)} not installed, and the {extra} needs them: "
            f"pip install '{DISTRIBUTION}[{extra}]'")


def main(extras: list[str]) -> int:
    print(version())
    missing = [f"{extra}: {', '.join(missing_modules(extra))}" for extra in extras if missing_modules(extra)]
    if missing:
        print(f"missing: {'; '.join(missing)}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
