"""What installing vnode-sync costs a host: time and installed size, each form against another wheel.

    flock /tmp/vnode-heavy.lock .venv/bin/python -m benchmarks.install_size \\
        --form before=OLD.whl:WHEELHOUSE --form node=dist/vnode_sync-*.whl:dist/wheelhouse/node \\
        --form coordinator=dist/vnode_sync-*.whl[coordinator]:dist/wheelhouse/coordinator [--rounds 3]

Each form goes into a fresh virtualenv (python -m venv) by `pip install --no-index --find-links
WHEELHOUSE WHEEL`, as a host without an index installs it (the roles' vnode_common_wheelhouse): the wall
time of that pip alone, and the site-packages size (du, like `du -sb`) less an empty venv's (pip itself).
Forms are interleaved round by round, in an order that moves with the round (scenario_runner), so a busy
spell on a shared host falls on all of them alike; the machine's steal over the cells is printed with them.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from benchmarks.scenario_runner import run_cells, steal_line


@dataclass(frozen=True)
class Form:
    name: str
    requirement: str   # a wheel path, with [extras] if any
    wheelhouse: str

    @classmethod
    def parse(cls, text: str) -> "Form":
        name, _, rest = text.partition("=")
        requirement, _, wheelhouse = rest.rpartition(":")
        if not (name and requirement and os.path.isdir(wheelhouse)):
            raise argparse.ArgumentTypeError(f"--form {text!r}: expected NAME=WHEEL[extras]:WHEELHOUSE_DIR")
        return cls(name, requirement, wheelhouse)


def tree_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.lstat(os.path.join(root, f)).st_size for f in files)
    return total


def site_packages(venv: str) -> str:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return os.path.join(venv, "lib", version, "site-packages")


def fresh_venv(parent: str, name: str) -> str:
    venv = os.path.join(parent, name)
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=300)
    return venv


def distributions(venv: str) -> int:
    listed = subprocess.run([os.path.join(venv, "bin", "pip"), "list", "--format=freeze",
                             "--disable-pip-version-check"], capture_output=True, text=True, check=True)
    return len(listed.stdout.split())


def install(form: Form, parent: str, round_: int) -> tuple[float, int, int]:
    """(seconds, site-packages bytes, distributions) for one install of `form` into a new venv."""
    venv = fresh_venv(parent, f"{form.name}-{round_}")
    started = time.monotonic()
    subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", "--disable-pip-version-check", "--no-index",
                    "--find-links", form.wheelhouse, form.requirement], check=True, timeout=900)
    took = time.monotonic() - started
    return took, tree_bytes(site_packages(venv)), distributions(venv)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--form", type=Form.parse, action="append", required=True,
                        help="NAME=WHEEL[extras]:WHEELHOUSE_DIR; repeat")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vnode-sync-install-size.") as parent:
        empty_venv = fresh_venv(parent, "empty")
        empty, empty_packages = tree_bytes(site_packages(empty_venv)), distributions(empty_venv)
        forms = {form.name: lambda round_, form=form: install(form, parent, round_) for form in args.form}
        rounds = [cells for _, _, cells in run_cells(((r, r) for r in range(args.rounds)), forms)]
    results = {name: [cells[name].outcome for cells in rounds] for name in forms}
    print(f"# empty venv's site-packages (pip): {empty / 1e6:.1f} MB, not counted below; "
          f"{args.rounds} rounds, interleaved in an order that moves; load {os.getloadavg()[0]:.1f}")
    print(f"{'form':<12} {'installed MB':>12} {'packages':>8} {'pip s median':>12} {'min':>6} {'max':>6}  requirement")
    for form in args.form:
        times = [t for t, _, _ in results[form.name]]
        size, packages = results[form.name][0][1] - empty, results[form.name][0][2] - empty_packages
        print(f"{form.name:<12} {size / 1e6:>12.1f} {packages:>8} {statistics.median(times):>12.1f} "
              f"{min(times):>6.1f} {max(times):>6.1f}  {os.path.basename(form.requirement)}")
    print(steal_line(cell for cells in rounds for cell in cells.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
