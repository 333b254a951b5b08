"""The fake Alpaca and the differential test's judge are written apart from what they judge, read from the source
with ``ast`` (lazy imports inside functions included, relative imports resolved, and followed through every
module of ``marketcast`` and ``tests`` they reach, a package's ``__init__`` with it):

* no module of ``marketcast.fake_alpaca`` reaches anything of ``marketcast`` but itself (and the package's
  root), so a wrong rule in ``marketcast.trade.risk`` cannot be wrong in the fake as well;
* the judge of ``tests/trade/test_fake_differential.py`` (``tests/trade/wire_judge.py``) reaches nothing of
  ``marketcast.trade``, through a tests helper either, so the loop's request builder, types and parsers are
  only on the side under test."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"marketcast": REPO / "src" / "marketcast", "tests": REPO / "tests"}
JUDGE = "tests.trade.wire_judge"


def source(name: str, roots: dict[str, Path]) -> Path | None:
    """The file of module ``name`` under ``roots`` (a package's ``__init__.py``), or None."""
    top, *rest = name.split(".")
    if top not in roots:
        return None
    base = roots[top].joinpath(*rest)
    for path in (base / "__init__.py", base.with_suffix(".py") if rest else None):
        if path is not None and path.is_file():
            return path
    return None


def imports(name: str, path: Path, roots: dict[str, Path]) -> set[str]:
    """Every module ``name`` (read from ``path``) imports: ``import a.b``, ``from a import b`` (``a``, and
    ``a.b`` where that is a module), relative ones resolved against ``name``'s package."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names if source(f"{base}.{a.name}", roots)}
    return {n for n in found if n}


def reach(name: str, roots: dict[str, Path] = ROOTS) -> set[str]:
    """``name`` and every module it imports under ``roots``, directly or through the modules it reaches (each
    module's parent packages too: importing ``a.b.c`` runs ``a`` and ``a.b``)."""
    seen, todo = set(), [name]
    while todo:
        current = todo.pop()
        parts = current.split(".")
        for n in [".".join(parts[:k]) for k in range(1, len(parts) + 1)]:
            if n in seen or n.split(".")[0] not in roots:
                continue
            seen.add(n)
            path = source(n, roots)
            if path is not None:
                todo += sorted(imports(n, path, roots))
    return seen


def under(names: set[str], package: str) -> set[str]:
    return {n for n in names if n == package or n.startswith(package + ".")}


def test_the_fake_reaches_nothing_of_marketcast_but_itself():
    modules = sorted(ROOTS["marketcast"].joinpath("fake_alpaca").glob("*.py"))
    assert {m.stem for m in modules} >= {"__init__", "rules", "exchange", "server", "market"}
    reached = set().union(*(reach(f"marketcast.fake_alpaca.{m.stem}".removesuffix(".__init__")) for m in modules))
    assert under(reached, "marketcast") - under(reached, "marketcast.fake_alpaca") == {"marketcast"}


def test_the_differential_tests_judge_reaches_nothing_of_marketcast_trade():
    reached = reach(JUDGE)
    assert under(reached, "marketcast.trade") == set()
    assert "marketcast.fake_alpaca.server" in reached  # the scan follows the judge into what it uses


def test_the_scan_catches_each_spelling_directly_lazily_and_through_a_helper(tmp_path):
    roots = {"marketcast": tmp_path / "src" / "marketcast", "tests": tmp_path / "tests"}
    files = {
        "src/marketcast/__init__.py": "",
        "src/marketcast/trade/__init__.py": "",
        "src/marketcast/trade/types.py": "",
        "src/marketcast/trade/risk/__init__.py": "",
        "src/marketcast/fake_alpaca/__init__.py": "",
        "src/marketcast/fake_alpaca/rules.py": "from marketcast.fake_alpaca import exchange\n",
        "src/marketcast/fake_alpaca/exchange.py": "def f():\n    from marketcast.trade import risk\n",
        "tests/__init__.py": "",
        "tests/trade/__init__.py": "",
        "tests/trade/judge.py": "from .helpers import world\n",
        "tests/trade/helpers.py": "import json\nfrom marketcast.trade.types import OrderRequest\n",
        "tests/trade/clean.py": "from marketcast.fake_alpaca import rules\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert under(reach("tests.trade.judge", roots), "marketcast.trade") == {"marketcast.trade",
                                                                           "marketcast.trade.types"}
    # a module of the fake that imports a sibling, which imports the product lazily inside a function
    assert under(reach("tests.trade.clean", roots), "marketcast.trade") == {"marketcast.trade",
                                                                           "marketcast.trade.risk"}
    (tmp_path / "src/marketcast/fake_alpaca/exchange.py").write_text("from . import rules\n")
    assert under(reach("tests.trade.clean", roots), "marketcast.trade") == set()
