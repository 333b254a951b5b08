"""docs/trading.md#exit-rule shows the table that benchmarks/exit_rule_table.py writes: the rows between its
markers are the script's ``--markdown`` of benchmarks/results/exit_rule_table.json, and that file holds both
rules for every strategy (MaxDiff's decisions differ by rule: it learns under the rule it is scored by; not a
timing test: it reads the file, it does not re-run the backtests)."""

import importlib.util
import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "exit_rule_table.json"


def _script():
    spec = importlib.util.spec_from_file_location("exit_rule_table", ROOT / "benchmarks" / "exit_rule_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_table_is_the_results_file():
    report = json.loads(RESULTS.read_text())
    doc = (ROOT / "docs" / "trading.md").read_text()
    block = doc.split("<!-- exit-rule-table: begin -->\n", 1)[1].split("\n<!-- exit-rule-table: end -->", 1)[0]
    assert block == _script().markdown(report)
    # the figures the prose quotes are the file's
    sp500 = report["symbols"]["SP500"]["strategies"]
    assert f"simple +{100 * sp500['simple']['next_open_no_wash']:.2f} % ->" in doc.replace("\n", " ")
    assert f"{sp500['simple']['refused_wash']} of 500 entries refused" in doc.replace("\n", " ")


def test_the_results_file_holds_both_rules_for_every_strategy():
    report = json.loads(RESULTS.read_text())
    assert report["windows"] == 500 and set(report["symbols"]) == {"SP500", "NASDAQ"}
    for got in report["symbols"].values():
        rows = got["strategies"]
        assert {"simple", "maxdiff", "highlow", "entry_takeprofit", "ci_guard", "unprofit_shutdown",
                "walk-forward (net)"} <= set(rows)
        for name, row in rows.items():
            for key in ("close", "next_open"):
                assert math.isfinite(row[key]), (name, key)
            if name == "walk-forward (net)":
                continue
            assert row["refused_wash"] >= 0 and row["trades"]["next_open"] + row["refused_wash"] <= 500, name
            if name != "maxdiff":  # the same decisions under both rules: next-open only refuses some entries
                assert row["trades"]["next_open"] <= row["trades"]["close"], name
