"""The compile toolkit's light commands import no torch (the layers themselves are the contract in
pyproject.toml, tests/spine/test_contracts.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def test_the_toolkit_imports_no_torch_until_it_measures():
    """``compile enable|status|analyze|compare`` stay fast: importing their modules loads no torch."""
    code = ("import sys, marketcast.compile, marketcast.commands.compile, marketcast.compile.analyze, "
            "marketcast.compile.compare, marketcast.compile.schema, marketcast.compile.report, "
            "marketcast.compile.toggle, marketcast.runtime.compile_settings; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(SRC)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"
