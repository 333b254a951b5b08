"""Docs figures that cannot drift: a table or fenced block of README.md or docs/*.md marked
``<!-- figures: benchmarks/results/NAME.json -->`` (an HTML comment on the line just before it) quotes only
numbers its results file holds. Each number in the block's data rows must equal a number of the file at the
precision shown (a percentage may be the file's fraction times 100), so a rerun benchmark whose figures the docs
did not take up fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKED = re.compile(r"^ *<!-- figures: (\S+\.json) -->\n((?: *```.*?^ *```$)|(?: *\|.*?(?=\n(?! *\|)|\Z)))",
                    flags=re.MULTILINE | re.DOTALL)
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def marked_blocks(text: str) -> list[tuple[str, str]]:
    """``(results file, block)`` for every marked table (its lines from the header on) or fenced block."""
    return [(path, block) for path, block in MARKED.findall(text)]


def figures(block: str) -> list[str]:
    """The numbers a block quotes: a table's data rows (the header, its rule and each row's label, the first
    cell, skipped), a fenced block's lines after its first (the command); dates are labels, not figures."""
    lines = [line.strip() for line in block.splitlines()]
    if lines[0].startswith("|"):
        rows = ["|".join(line.split("|")[2:]) for line in lines[2:]]
    else:
        rows = lines[2:-1]
    return [m.group(0) for line in rows for m in NUMBER.finditer(DATE.sub("", line))]


def leaves(value) -> list[float]:
    """Every number in a JSON document (booleans are not numbers)."""
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [x for item in value for x in leaves(item)]
    return []


def held(shown: str, numbers: list[float]) -> bool:
    """Whether ``shown`` (as the docs print it: ``1,234.5``, ``-0.02``) is one of ``numbers`` rounded to the
    decimals shown, or one of them times 100 (a fraction shown as a percentage)."""
    text = shown.replace(",", "")
    decimals = len(text.partition(".")[2])
    target = float(text)
    tolerance = 0.5 * 10 ** -decimals + 1e-9
    return any(abs(x - target) <= tolerance or abs(100 * x - target) <= tolerance for x in numbers)


def test_a_marked_table_is_read_and_checked():
    text = ("<!-- figures: r.json -->\n| a | b | c |\n|---|---|---|\n| 7 w.p. 0.9 | x 1.25 | **-0.5 %** 155-229 2018-01-02 |\n\nnot 7\n"
            "<!-- figures: s.json -->\n```\ncmd 9\nrow 3.0\n```\n")
    (path, table), (path2, fenced) = marked_blocks(text)
    assert (path, path2) == ("r.json", "s.json")
    assert figures(table) == ["1.25", "-0.5", "155", "229"] and figures(fenced) == ["3.0"]
    assert held("1.25", [1.2512]) and not held("1.25", [1.256]) and held("-0.5", [-0.005])
    assert held("1,234", [1233.6]) and not held("1,234", [1233.4])


MARKS = [(doc, path, block) for doc in DOCS for path, block in marked_blocks(doc.read_text(encoding="utf-8"))]


def test_some_figures_are_marked():
    assert len(MARKS) >= 3


@pytest.mark.parametrize("doc,path,block", MARKS, ids=[f"{d.name}:{p}" for d, p, _ in MARKS])
def test_every_marked_figure_is_in_its_results_file(doc, path, block):
    results = ROOT / path
    assert results.is_file(), f"{doc.name} quotes {path}, which is not in the repository"
    numbers = leaves(json.loads(results.read_text(encoding="utf-8")))
    missing = [shown for shown in figures(block) if not held(shown, numbers)]
    assert not missing, f"{doc.name}: figures not in {path}: {missing}"
