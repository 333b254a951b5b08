"""The contracts in pyproject.toml (import-linter) hold, and none is a contract that cannot fail: an upward import
planted in a copy of the package breaks it, a lazy one inside a function too; a venue imported outside the wiring
breaks trade's own, and so does the test kit imported by a product room. The benchmarks import nothing from
``tests/`` (an ``ast`` scan, checked against a planted import)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(src: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` with the project's contracts over the package found in ``src``."""
    return subprocess.run([str(LINT), str(ROOT / "pyproject.toml"), "--no-cache"], cwd=src,
                          capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(src), "PATH": ""})


def test_the_house_keeps_every_contract():
    done = lint(ROOT / "src")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "0 broken" in done.stdout


@pytest.mark.parametrize("where, planted, broken", [
    ("data/planted.py", "from marketcast.commands import options\n", "layers run one way down"),
    ("backtest/planted.py", "def f():\n    from marketcast.report import page\n", "layers run one way down"),
    ("signals.py", "import marketcast.fileio\n", "layers run one way down"),
    ("forecast/toto/planted.py", "import marketcast.forecast.kronos\n", "forecast loading layer"),
    ("forecast/hub.py", "import marketcast.forecast.checkpoint\n", "forecast loading layer"),
    ("runs/read.py", "from marketcast.runs import write\n", "run store sides"),
    ("runs/write.py", "def f():\n    from marketcast.runs.compact import compact\n", "run store sides"),
    ("report/planted.py", "def f():\n    from marketcast.forecast.registry import load_forecaster\n", "reports only draw"),
    ("report/stored.py", "from marketcast.forecast.base import make_batch\n", "reports only draw"),
    ("trade/journal/planted.py", "from marketcast.trade.loop import cycle\n", "trade rooms run one way down"),
    ("trade/risk/planted.py", "def f():\n    from marketcast.trade.loop.orders import OrderDesk\n",
     "trade rooms run one way down"),
    ("trade/types.py", "import marketcast.trade.journal.ids\n", "trade rooms run one way down"),
    ("trade/ops/planted.py", "import marketcast.trade.risk.limits\n", "trade rooms run one way down"),
    ("report/planted.py", "from marketcast.trade.venues.paper import PaperBroker\n",
     "only the wiring and the venues import a venue"),
    ("runs/planted.py", "def f():\n    import marketcast.trade.venues.alpaca\n",
     "only the wiring and the venues import a venue"),
    ("commands/planted.py", "from marketcast.fake_alpaca.server import FakeAlpaca\n",
     "no product room imports the test kit"),
    ("fake_alpaca/planted.py", "from marketcast.trade.types import Account\n",
     "the fake Alpaca imports nothing of the product"),
    ("fake_alpaca/rules.py", "def f():\n    import marketcast.trade.risk.protections\n",
     "the fake Alpaca imports nothing of the product"),
    ("commands/planted.py", "def f():\n    import marketcast.trade.test_kit.chaos\n",
     "no product room imports the test kit"),
])
def test_an_upward_import_breaks_the_contract(tmp_path, where, planted, broken):
    shutil.copytree(ROOT / "src" / "marketcast", tmp_path / "marketcast",
                    ignore=shutil.ignore_patterns("__pycache__"))
    path = tmp_path / "marketcast" / where
    path.write_text((path.read_text() if path.exists() else "") + "\n" + planted)
    done = lint(tmp_path)
    assert done.returncode == 1, done.stdout[-3000:]
    assert "1 broken" in done.stdout and f"{broken}" in done.stdout.split("Broken contracts")[1]


def test_no_two_rooms_import_each_other():
    """0 circles between rooms: rooms on one line of the layers (report : sweep : leaderboard : finetune, trade :
    runs) may import each other, but never both ways (grimp, the graph import-linter reads)."""
    import grimp

    graph = grimp.build_graph("marketcast", cache_dir=None)
    rooms = sorted({m.split(".")[1] for m in graph.modules if "." in m})
    both = [(a, b) for a in rooms for b in rooms if a < b
            and graph.chain_exists(f"marketcast.{a}", f"marketcast.{b}", as_packages=True)
            and graph.chain_exists(f"marketcast.{b}", f"marketcast.{a}", as_packages=True)]
    assert both == []
    assert graph.chain_exists("marketcast.report", "marketcast.trade", as_packages=True)  # it sees real arrows


@pytest.mark.parametrize("where, planted", [
    ("trade/loop/planted.py", "from marketcast.trade.venues import paper\n"),
    ("trade/ops/planted.py", "def f():\n    from marketcast.trade.venues.endpoints import data_url\n"),
])
def test_a_venue_imported_by_a_room_breaks_both_trade_contracts(tmp_path, where, planted):
    """A room below the wiring that builds a venue runs up (or across) the rooms and past the venue rule."""
    shutil.copytree(ROOT / "src" / "marketcast", tmp_path / "marketcast",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "marketcast" / where).write_text(planted)
    done = lint(tmp_path)
    assert done.returncode == 1, done.stdout[-3000:]
    broken = done.stdout.split("Broken contracts")[1]
    assert "2 broken" in done.stdout
    assert "trade rooms run one way down" in broken and "only the wiring and the venues import a venue" in broken


def imports_of_tests(path: Path) -> list[str]:
    """The modules under ``tests`` that ``path`` imports (``import tests...`` or ``from tests... import``), lazy
    ones inside functions too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "tests"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "tests":
            found.append(node.module)
    return found


def test_the_benchmarks_import_nothing_from_tests(tmp_path):
    """What a benchmark needs of the test suite's machinery lives in the package (``marketcast.trade.test_kit``)."""
    benchmarks = sorted((ROOT / "benchmarks").glob("*.py"))
    assert len(benchmarks) > 5 and ROOT / "benchmarks" / "trade_chaos.py" in benchmarks
    assert {str(b.relative_to(ROOT)): imports_of_tests(b) for b in benchmarks if imports_of_tests(b)} == {}
    planted = tmp_path / "planted.py"  # the scan is not vacuous: each spelling of the import is caught
    planted.write_text("from tests.trade import chaos\nimport tests.conftest\n\n\ndef f():\n"
                       "    from tests import trade\n")
    assert sorted(imports_of_tests(planted)) == ["tests", "tests.conftest", "tests.trade"]
