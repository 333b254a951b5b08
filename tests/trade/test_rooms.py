"""trade/'s top level holds only the wiring (``launch``, ``start``, ``replay``) and the vocabulary every room
speaks (``types``, the Broker ``interface``); everything else lives in a room. Which room may import which is the import-linter
contract in pyproject.toml (tests/spine/test_contracts.py)."""

from __future__ import annotations

from pathlib import Path

TRADE = Path(__file__).resolve().parents[2] / "src" / "marketcast" / "trade"


def test_the_rooms_exist_and_the_top_is_only_wiring_and_vocabulary():
    rooms = {p.name for p in TRADE.iterdir() if (p / "__init__.py").exists()}
    assert rooms == {"journal", "loop", "ops", "risk", "venues", "test_kit"}
    top = {p.stem for p in TRADE.glob("*.py") if p.name != "__init__.py"}
    assert top == {"launch", "start", "replay", "types", "interface"}
