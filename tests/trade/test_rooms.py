"""trade/ is built in rooms that import one way down, and the loop reaches a broker only through its interface.

Ranks, lowest first: ``journal`` (records, SQLite, owner-only files) < ``ops`` (redaction, alerts, status) <
``broker`` (interface, rules, adapters: the paper broker keeps its book with the journal's SQLite helpers and
Alpaca's errors are redacted) < the policy modules (``risk``, ``portfolio``) < ``loop`` < the wiring at the top
(``launch``, ``replay``; the commands live in ``marketcast.commands``). ``broker.types`` (plain data: orders, fills,
positions) is the vocabulary every room speaks. A module may import its own rank or lower; imports under
``if TYPE_CHECKING:`` are annotations, not dependencies. The adapters (paper, alpaca and its data and endpoints) are imported only by
the wiring: a test fails if the loop, the journal, ops or policy imports one directly.
"""

from __future__ import annotations

import ast
from pathlib import Path

TRADE = Path(__file__).resolve().parents[2] / "src" / "marketcast" / "trade"
RANK = {"journal": 0, "ops": 1, "broker": 2, "risk": 3, "portfolio": 3, "loop": 4}
TOP = 5
VOCABULARY = "marketcast.trade.broker.types"
ADAPTERS = {"paper", "alpaca", "alpaca_data", "endpoints"}


def room(module: str) -> str:
    """``marketcast.trade.loop.cycle`` -> ``loop``; a top-level module is its own room."""
    return module.split(".")[2]


def rank(module: str) -> int:
    return RANK.get(room(module), TOP)


def runtime_imports(path: Path) -> set[str]:
    """Absolute ``marketcast.trade`` modules imported by ``path``, lazy ones included, TYPE_CHECKING ones not."""
    tree = ast.parse(path.read_text(), str(path))
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
            for n in ast.walk(node)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    known = {str(p.relative_to(TRADE.parents[1]).with_suffix("")).replace("/", ".") for p in TRADE.rglob("*.py")}
    return {m for m in out if m in known and m.startswith("marketcast.trade.")}


def modules() -> dict[str, Path]:
    return {str(p.relative_to(TRADE.parents[1]).with_suffix("")).replace("/", "."): p
            for p in TRADE.rglob("*.py") if p.name not in ("__init__.py", "__main__.py")}


def test_rooms_exist_and_the_top_is_only_wiring_and_policy():
    rooms = {room(m) for m in modules()}
    assert {"broker", "journal", "loop", "ops"} <= rooms
    assert {r for r in rooms if (TRADE / f"{r}.py").exists()} == {
        "launch", "replay", "risk", "portfolio"}


def test_imports_run_one_way_down():
    up = [(m, i) for m, p in modules().items() for i in runtime_imports(p)
          if rank(i) > rank(m) and room(i) != room(m) and i != VOCABULARY]
    assert up == []


def test_only_the_wiring_imports_a_broker_adapter():
    direct = [(m, i) for m, p in modules().items() for i in runtime_imports(p)
              if room(i) == "broker" and i.split(".")[3] in ADAPTERS and rank(m) < TOP and room(m) != "broker"]
    assert direct == []


def test_the_scanner_sees_a_planted_adapter_import(tmp_path, monkeypatch):
    planted = TRADE / "loop" / "cycle.py"
    text = planted.read_text() + "\n\ndef _planted():\n    from marketcast.trade.broker.paper import PaperBroker\n"
    copy = tmp_path / "cycle.py"
    copy.write_text(text)
    assert "marketcast.trade.broker.paper" in runtime_imports(copy)
    guarded = tmp_path / "guarded.py"
    guarded.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                       "    from marketcast.trade.broker.paper import PaperBroker\n")
    assert runtime_imports(guarded) == set()
