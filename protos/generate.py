"""Generate the Python wire code from protos/ (or, with --check, verify it is current).

    python protos/generate.py          # rewrite vnode_sync/wire/*_pb2*.py
    python protos/generate.py --check  # exit 1 if the committed code differs
"""

import argparse
import filecmp
import pathlib
import shutil
import sys
import tempfile

from grpc_tools import protoc

PROTO_ROOT = pathlib.Path(__file__).resolve().parent
REPO_ROOT = PROTO_ROOT.parent
PROTO_FILES = sorted(p.relative_to(PROTO_ROOT) for p in PROTO_ROOT.rglob("*.proto"))


def generate_into(out_dir: pathlib.Path) -> list[pathlib.Path]:
    args = ["protoc", f"-I{PROTO_ROOT}", f"--python_out={out_dir}", f"--pyi_out={out_dir}",
            f"--grpc_python_out={out_dir}"] + [str(PROTO_ROOT / p) for p in PROTO_FILES]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return sorted(p.relative_to(out_dir) for p in out_dir.rglob("*.py*") if p.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp)
        generated = generate_into(out)
        stale = [g for g in generated
                 if not (REPO_ROOT / g).exists() or not filecmp.cmp(out / g, REPO_ROOT / g, shallow=False)]
        if args.check:
            for g in stale:
                print(f"stale generated file: {g} (run: python protos/generate.py)", file=sys.stderr)
            return 1 if stale else 0
        for g in generated:
            shutil.copyfile(out / g, REPO_ROOT / g)
            print(f"wrote {g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
