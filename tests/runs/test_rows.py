"""Rows of a cell: every metric of the backtest's JSON, flattened generically, plus identity and settings."""

import dataclasses

import numpy as np
import pytest

from marketcast.backtest.overfit import moments
from marketcast.backtest.report import symbol_json
from marketcast.runs import rows as rows_module
from marketcast.runs.cells import Cell, setting_names
from marketcast.runs.rows import RunContext, error_row, fingerprint, flatten, ok_rows

from .conftest import CONFIG

CTX = RunContext(run_id="r1", kind="sweep", spec_hash="h", code_version="v")


def test_flatten_joins_nested_keys_and_keeps_lists():
    assert flatten({"a": {"b": 1, "c": {"d": None}}, "e": [1, 2], "f": "x"}, "m.") == {
        "m.a.b": 1, "m.a.c.d": None, "m.e": [1, 2], "m.f": "x"}


def test_a_cell_has_one_cell_row_and_one_row_per_strategy_with_its_metrics(results, embedded_bars):
    result = results[0]
    cell = Cell(symbol=result.symbol, config=CONFIG)
    rows = ok_rows(CTX, cell, 3, result, fingerprint(embedded_bars[0]), seconds=0.25)
    doc = symbol_json(result)
    assert [r["strategy"] for r in rows] == [None, *doc["strategies"]]
    assert all(r["status"] == "ok" and r["cell_id"] == cell.cell_id and r["cell_index"] == 3 for r in rows)
    assert "record" in rows[0] and all("record" not in r for r in rows[1:])
    for row in rows[1:]:
        assert {k: row[k] for k in doc["strategies"][row["strategy"]]} == doc["strategies"][row["strategy"]]
        net = result.strategies[row["strategy"]].returns
        assert row["returns"] == net.tolist() and np.prod(1 + net) - 1 == pytest.approx(row["return"])
    for key, value in doc["metrics"].items():
        assert all(r[f"metrics.{key}"] == value for r in rows)
    assert rows[0]["windows"] == 15 and rows[0]["ci_band"] == [0.4, 0.6] and rows[0]["fill_mode"] == "touch"
    assert set(setting_names()) <= set(rows[0])
    # the cell as a trial of its run: its walk-forward record and the moments its deflated Sharpe needs
    record = result.walk_forward["returns"]
    sharpe, skew, kurtosis = moments(record)
    assert rows[0]["walk_forward.returns"] == record.tolist() and rows[0]["walk_forward.observations"] == len(record)
    assert (rows[0]["walk_forward.sharpe_per_period"], rows[0]["walk_forward.skew"],
            rows[0]["walk_forward.kurtosis"]) == (sharpe, skew, kurtosis)
    assert rows[0]["walk_forward.periods_per_year"] == result.periods_per_year
    assert all(not any(k.startswith("walk_forward.") for k in r) for r in rows[1:])


def test_a_metric_the_backtest_adds_becomes_a_column(results, monkeypatch):
    def richer(result):
        doc = symbol_json(result)
        for metrics in doc["strategies"].values():
            metrics["psr"] = 0.75
            metrics["ci"] = {"low": -0.1, "high": 0.2}
            metrics["windows"] = 99  # a name that is already a setting keeps its own column
        doc["metrics"]["benchmark"] = {"return": 0.05}
        return doc

    monkeypatch.setattr(rows_module, "symbol_json", richer)
    rows = ok_rows(CTX, Cell(symbol="SP500", config=CONFIG), 0, results[0], "fp", seconds=None)
    strategy_row = rows[1]
    assert strategy_row["psr"] == 0.75 and strategy_row["ci.low"] == -0.1 and strategy_row["ci.high"] == 0.2
    assert strategy_row["metric.windows"] == 99 and strategy_row["windows"] == 15
    assert rows[0]["metrics.benchmark.return"] == 0.05


def test_error_row_and_cell_identity():
    cell = Cell(symbol="AAPL", config=CONFIG, data_dir="/data")
    row = error_row(CTX, cell, 7, "AAPL.csv: row 3: high below low")
    assert row["status"] == "error" and row["strategy"] is None and row["error"].startswith("AAPL.csv")
    same = Cell(symbol="AAPL", config=dataclasses.replace(CONFIG), data_dir="/data")
    assert same.cell_id == cell.cell_id
    for changed in (dataclasses.replace(cell, symbol="MSFT"), dataclasses.replace(cell, model="toto"),
                    dataclasses.replace(cell, config=dataclasses.replace(CONFIG, fill_mode="penetrate"))):
        assert changed.cell_id != cell.cell_id


def test_fingerprint_follows_the_content(embedded_bars):
    sp = embedded_bars[0]
    assert fingerprint(sp) == fingerprint(dataclasses.replace(sp, frame=sp.frame.copy()))
    bumped = sp.frame.copy()
    bumped.iloc[100, bumped.columns.get_loc("close")] *= 1.0001
    assert fingerprint(dataclasses.replace(sp, frame=bumped)) != fingerprint(sp)
    assert fingerprint(dataclasses.replace(sp, asset_class="crypto")) != fingerprint(sp)


def test_code_version_names_the_checkouts_commit_and_whether_it_is_dirty():
    import subprocess
    from pathlib import Path

    import marketcast
    from marketcast.runs.rows import code_version

    here = Path(marketcast.__file__).resolve().parent

    def git(*args):
        return subprocess.run(["git", "-C", str(here), *args], capture_output=True, text=True, check=False)

    head = git("rev-parse", "--short=12", "HEAD")
    code_version.cache_clear()
    if head.returncode != 0:  # not a git checkout: the package version alone
        assert code_version() == marketcast.__version__
        return
    dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", ".").stdout.strip())
    assert code_version() == f"{marketcast.__version__}+g{head.stdout.strip()}{'.dirty' if dirty else ''}"


def test_settings_added_later_keep_the_ids_of_runs_recorded_before_them():
    """--exit close, no --hold and no --equity are what every run before them did: the id is the digest of the
    settings without them (so an old store's cells still match a new run's), and setting any changes it."""
    from marketcast.runs.cells import digest

    old = dataclasses.replace(CONFIG, exit="close", hold=False, equity=None)
    cell = Cell(symbol="AAPL", config=old)
    settings = cell.settings()
    for added in ("timezone", "exit", "hold", "equity"):
        del settings[added]
    assert cell.config.exit == "close" and not cell.config.hold and cell.config.equity is None
    assert cell.cell_id == digest({"symbol": "AAPL", **settings})
    for changed in (dict(exit="next-open"), dict(hold=True), dict(equity=20_000.0)):
        assert Cell(symbol="AAPL", config=dataclasses.replace(old, **changed)).cell_id != cell.cell_id
