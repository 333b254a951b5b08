"""The runtime sits below the forecasters, the compile toolkit above them: read every import with ``ast``.

Imports inside functions count too (a lazy import still runs back up). A ``cli.py`` belongs to the CLI layer
wherever it lives, so it is exempt from its package's rule.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "marketcast"
ABOVE_FORECAST = ("backtest", "runs", "trade", "report", "sweep", "cli")
FORBIDDEN = {  # package -> marketcast subpackages its modules must not import
    "runtime": ("forecast", "compile", *ABOVE_FORECAST),
    "forecast": ("compile", *ABOVE_FORECAST),
    "compile": ABOVE_FORECAST,
}


def module_name(path: Path, root: Path = SRC) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, root: Path = SRC) -> set[str]:
    """Every module ``path`` imports (absolute names; relative imports resolved against its package)."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return out


def violations(pairs) -> list[tuple[str, str]]:
    """The (module, import) pairs that run back up the layers."""
    return [(m, name) for m, name in pairs
            for package, banned in FORBIDDEN.items()
            if m.startswith(f"marketcast.{package}.") and name.split(".")[1] in banned]


def edges() -> list[tuple[str, str]]:
    """(module, imported marketcast module) for every module of the packages with a rule."""
    out = []
    for package in FORBIDDEN:
        for path in sorted((PACKAGE / package).rglob("*.py")):
            if path.name != "cli.py":
                out += [(module_name(path), name) for name in imported(path) if name.startswith("marketcast.")]
    return out


def test_the_scanner_sees_top_level_lazy_and_relative_imports(tmp_path):
    found = edges()
    assert ("marketcast.compile.check", "marketcast.compile.measure") in found  # top level
    assert ("marketcast.compile.measure", "marketcast.runtime.guard") in found  # inside a function
    assert ("marketcast.forecast.toto.forecaster", "marketcast.runtime.steps") in found
    planted = tmp_path / "marketcast" / "runtime" / "x.py"
    planted.parent.mkdir(parents=True)
    planted.write_text("def f():\n    from ..forecast import base\n")
    pairs = [("marketcast.runtime.x", name) for name in imported(planted, tmp_path)]
    assert ("marketcast.runtime.x", "marketcast.forecast.base") in violations(pairs)


def test_no_import_runs_back_up():
    assert violations(edges()) == []


def test_the_toolkit_imports_no_torch_until_it_measures():
    """``compile enable|status|analyze|compare`` stay fast: importing their modules loads no torch."""
    code = ("import sys, marketcast.compile, marketcast.compile.cli, marketcast.compile.analyze, "
            "marketcast.compile.compare, marketcast.compile.schema, marketcast.compile.report, "
            "marketcast.compile.toggle, marketcast.runtime.settings; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(SRC)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"
