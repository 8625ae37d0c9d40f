"""The committed generated wire code is exactly what protos/ produces."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_generated_python_matches_the_proto():
    pytest.importorskip("grpc_tools", reason="grpcio-tools is a test dependency: pip install -e '.[test]'")
    result = subprocess.run([sys.executable, str(ROOT / "protos" / "generate.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
