"""The released artifacts of one version, in one directory (`make dist`: dist/), with their checksums.

  vnode_sync-VERSION-py3-none-any.whl       the product; `[coordinator]` adds the coordinator's extra
  vnode-sync-datanode-throttle-VERSION.jar  the DataNode agent (-javaagent), built by Maven beforehand
  wheelhouse/node/                          the pinned dependencies of a storage or compute node
  wheelhouse/coordinator/                   those of the coordinator host (the node's and the extra's)
  vnode-sync-ansible-VERSION.tar.gz         deploy/ansible: the roles, site.yml, the example inventory
  SHA256SUMS                                every file above; check with `sha256sum -c SHA256SUMS`

A site without a package index copies these: `pip install --no-index --find-links wheelhouse/node
vnode_sync-VERSION-py3-none-any.whl` (the roles do it with vnode_common_source and _wheelhouse).
The wheelhouses are made by scripts/setup.d/wheelhouse.sh, from setup's wheelhouse where there is one.

  python scripts/dist.py [--out dist] [--wheel BUILT.whl] [--jar PATH]
  python scripts/dist.py --wheel-only --out DIR     (the test suite's wheel, tests/conftest.py)
"""

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
JAR = REPO / "agents" / "datanode-throttle" / "target" / "vnode-sync-datanode-throttle.jar"
# Maven writes the pom's coordinates into every jar it builds; the agent reports the same version in its HELLO.
JAR_POM_PROPERTIES = "META-INF/maven/org.vnode-sync/vnode-sync-datanode-throttle/pom.properties"
FORMS = {"node": "", "coordinator": "coordinator"}   # wheelhouse name: the extras it adds
# What a copy of the checkout leaves out: a stale build/ or egg-info could put removed modules into the wheel.
NOT_SOURCE = shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", "target")


class DistError(Exception):
    """An artifact cannot be made; the message says which and what to run."""


def project_version() -> str:
    with open(REPO / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["version"]


def build_wheel(out: Path) -> Path:
    """vnode-sync's wheel, built by pip from a clean copy of the checkout (the checkout stays clean too)."""
    with tempfile.TemporaryDirectory(prefix="vnode-sync-wheel.") as scratch:
        source = Path(scratch) / "src"
        shutil.copytree(REPO, source, ignore=NOT_SOURCE)
        out.mkdir(parents=True, exist_ok=True)
        build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "--disable-pip-version-check",
                                "-w", str(out), str(source)], capture_output=True, text=True, timeout=300)
    if build.returncode != 0:
        raise DistError(f"pip wheel failed: {build.stderr.strip().splitlines()[-1:]}")
    (wheel,) = out.glob(f"vnode_sync-{project_version()}-*.whl")
    return wheel


def build_wheelhouse(directory: Path, extras: str) -> None:
    """One form's pinned dependencies, by the one wheelhouse script (offline from setup's wheelhouse)."""
    env = dict(os.environ)
    setup_wheelhouse = Path(sys.prefix) / "wheelhouse"
    if (setup_wheelhouse / ".built").exists():
        env["VNODE_WHEELHOUSE_LINKS"] = str(setup_wheelhouse)
    run = subprocess.run(["bash", str(REPO / "scripts" / "setup.d" / "wheelhouse.sh"), sys.prefix, str(directory),
                          extras], capture_output=True, text=True, timeout=900, env=env)
    if run.returncode != 0:
        raise DistError(f"wheelhouse {directory.name}: {run.stderr.strip()[-500:]}")


def jar_version(jar: Path) -> str | None:
    """The version Maven built the jar as (the pom's <version>), None if the jar does not say."""
    try:
        with zipfile.ZipFile(jar) as z:
            properties = z.read(JAR_POM_PROPERTIES).decode()
    except (KeyError, zipfile.BadZipFile):
        return None
    return next((line.split("=", 1)[1].strip() for line in properties.splitlines() if line.startswith("version=")),
                None)


def _without_owner(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """Files as a site unpacks them: no build host's owner, time or byte-code."""
    if "__pycache__" in member.name or member.name.endswith((".pyc", ".retry")):
        return None
    member.uid = member.gid = 0
    member.uname = member.gname = "root"
    member.mtime = 0
    return member


def roles_tarball(out: Path, version: str) -> Path:
    tarball = out / f"vnode-sync-ansible-{version}.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(REPO / "deploy" / "ansible", arcname=f"vnode-sync-ansible-{version}", filter=_without_owner)
    return tarball


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_checksums(out: Path) -> Path:
    files = sorted(p for p in out.rglob("*") if p.is_file() and not p.name.startswith(".") and p.name != "SHA256SUMS")
    sums = out / "SHA256SUMS"
    sums.write_text("".join(f"{sha256(p)}  {p.relative_to(out)}\n" for p in files))
    return sums


def _clear(out: Path) -> None:
    """Only what an earlier run made: --out may name a directory that holds other files."""
    for old in [*out.glob("vnode_sync-*.whl"), *out.glob("vnode-sync-*"), out / "SHA256SUMS"]:
        if old.is_file():
            old.unlink()


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def listing(out: Path) -> str:
    rows = []
    for path in sorted(out.iterdir()):
        if path.name.startswith("."):
            continue
        if path.name == "wheelhouse":
            for form in sorted(path.iterdir()):
                rows.append((_size(form), f"{form.relative_to(out)}/ ({len(list(form.glob('*.whl')))} wheels)"))
        else:
            rows.append((_size(path), path.name))
    return "\n".join(f"{size:>13,} bytes  {name}" for size, name in rows + [(sum(s for s, _ in rows), "in all")])


def make_dist(out: Path, wheel: Path | None, jar: Path) -> None:
    version = project_version()
    if not jar.is_file():
        raise DistError(f"no DataNode agent jar at {jar}: run `sh scripts/setup.d/datanode-throttle.sh` first")
    built_as = jar_version(jar)
    if built_as != version:
        raise DistError(f"{jar} is version {built_as or 'unknown'}, not {version} (pyproject.toml): one version "
                        "for everything; set agents/datanode-throttle/pom.xml's <version> and rebuild the jar")
    out.mkdir(parents=True, exist_ok=True)
    _clear(out)
    if wheel is None:
        build_wheel(out)
    elif not wheel.name.startswith(f"vnode_sync-{version}-"):
        raise DistError(f"{wheel.name} is not version {version} (pyproject.toml)")
    else:
        shutil.copy2(wheel, out / wheel.name)
    shutil.copy2(jar, out / f"vnode-sync-datanode-throttle-{version}.jar")
    for form, extras in FORMS.items():
        build_wheelhouse(out / "wheelhouse" / form, extras)
    roles_tarball(out, version)
    write_checksums(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dist.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "dist", help="where the artifacts go (default dist/)")
    parser.add_argument("--wheel", type=Path, help="a wheel already built from this checkout, instead of building one")
    parser.add_argument("--jar", type=Path, default=JAR, help=f"the DataNode agent's jar (default {JAR})")
    parser.add_argument("--wheel-only", action="store_true", help="build the wheel into --out, nothing else")
    args = parser.parse_args(argv)
    try:
        if args.wheel_only:
            print(build_wheel(args.out))
            return 0
        make_dist(args.out, args.wheel, args.jar)
    except DistError as e:
        print(f"dist.py: error: {e}", file=sys.stderr)
        return 1
    print(f"vnode-sync {project_version()} in {args.out}:")
    print(listing(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
