"""Write docs/settings.md from the settings classes (or, with --check, verify it is current).

    .venv/bin/python scripts/settings_reference.py          # rewrite docs/settings.md
    .venv/bin/python scripts/settings_reference.py --check  # exit 1 if it differs; print the counts
"""

import argparse
import pathlib
import sys

from vnode_sync.agents.config import AgentConfig
from vnode_sync.config_loading import documented, reference
from vnode_sync.coordinator.config import CoordinatorConfig

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "settings.md"
KINDS = (("The coordinator (`vnode-coordinator --config`)", CoordinatorConfig),
         ("A storage or compute agent (`vnode-agent --config`)", AgentConfig))
HEAD = """# Settings

Every setting an admin sets in the coordinator's and the agents' files, one table per section:
what it may be (with its unit), its default and why. Generated from the settings classes by
`scripts/settings_reference.py` (a test fails when this file is behind them). A few more keys
are read but not listed here: test seams and periods set by measurement (`Internal` in
`vnode_sync/config_loading.py`); a site has no reason to set them.

"""


def document() -> str:
    return HEAD + "\n".join(reference(title, kind) for title, kind in KINDS)


def counts() -> dict[str, int]:
    return {kind.__name__: len(documented(kind)) for _, kind in KINDS}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    print(" ".join(f"{name}: {n} settings" for name, n in counts().items()))
    if args.check:
        if not DOC.exists() or DOC.read_text() != document():
            print(f"{DOC} is behind the settings classes: run scripts/settings_reference.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(document())
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
