"""The fake Alpaca is written apart from the rules model it judges: no module of ``marketcast.fake_alpaca``
imports anything of ``marketcast`` but itself (read from the source with ``ast``, lazy imports inside
functions included), so a wrong rule in ``marketcast.trade.risk`` cannot be wrong in the fake as well."""

from __future__ import annotations

import ast
from pathlib import Path

FAKE = Path(__file__).resolve().parents[2] / "src" / "marketcast" / "fake_alpaca"


def foreign_imports(path: Path) -> list[str]:
    """Every ``marketcast`` module ``path`` imports outside ``marketcast.fake_alpaca`` (relative imports
    resolve inside the package and count as its own)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        found += [n for n in names if n.split(".")[0] == "marketcast"
                  and not (n == "marketcast.fake_alpaca" or n.startswith("marketcast.fake_alpaca."))]
    return found


def test_the_fake_imports_nothing_of_marketcast_but_itself():
    modules = sorted(FAKE.glob("*.py"))
    assert {m.stem for m in modules} >= {"__init__", "rules", "exchange", "server", "market"}
    assert {m.name: foreign_imports(m) for m in modules if foreign_imports(m)} == {}


def test_the_scan_catches_each_spelling(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("from marketcast.trade.risk.protections import refusals\nimport marketcast.trade.types\n"
                       "from marketcast.fake_alpaca import rules\n\n\n"
                       "def f():\n    from marketcast.trade import risk\n")
    assert sorted(foreign_imports(planted)) == ["marketcast.trade", "marketcast.trade.risk.protections",
                                                "marketcast.trade.types"]
