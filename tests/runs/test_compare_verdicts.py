"""``runs compare`` on hand-made runs: "settings differ" (listed, exit 0 unless --strict) is not "results
differ for the same settings" (FAIL, exit 1); the DuckDB join agrees row for row with ``compile compare``'s
Python judge (plus the lost-number rule) on runs with failed cells, cells and strategies in one run only,
and NaNs; more than 40 rows hide the PASS ones unless --all."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from marketcast.commands import main
from marketcast.compile.compare import compare_backtests
from marketcast.runs.compare import compare_runs
from marketcast.runs.store import RunStore


def _cell(run: str, index: int, symbol: str, settings: dict, strategies: dict | None, mase: float = 0.5,
          error: str | None = None) -> list[dict]:
    """A cell row and its strategy rows (``strategies``: name -> (return, sharpe); None: a failed cell)."""
    cell = {"run_id": run, "cell_id": f"{run}-{index}", "cell_index": index, "symbol": symbol, **settings,
            "status": "error" if strategies is None else "ok", "error": error, "metrics.mase_close": mase}
    rows = [{**cell, "strategy": None}]
    for name, (ret, sharpe) in (strategies or {}).items():
        rows.append({**cell, "strategy": name, "return": ret, "sharpe": sharpe})
    return rows


def _run(store: RunStore, run: str, cells: list[list[dict]]) -> None:
    store.write_info(run, {"kind": "sweep", "created_at": f"2030-01-01T00:00:00.00000{run[-1] == 'b':d}",
                           "cells_total": len(cells), "status": "done"})
    store.write_rows(run, [row for cell in cells for row in cell])


def _cli(capsys, root, *args) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["runs", "compare", *args, "--store", str(root), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_same_settings_different_results_fail_with_hand_computed_deltas(tmp_path, capsys):
    store = RunStore(tmp_path)
    same = {"fee": 0.001, "model": "baseline"}
    _run(store, "run-a", [_cell("run-a", 0, "SP500", same, {"simple": (0.10, 1.0), "buy_hold": (0.05, 0.5)})])
    _run(store, "run-b", [_cell("run-b", 0, "SP500", same, {"simple": (0.17, 1.5), "buy_hold": (0.07, 0.5)},
                                mase=0.75)])
    code, result = _cli(capsys, tmp_path, "run-a", "run-b")
    assert code == 1 and result["status"] == result["results"] == "FAIL" and result["settings"] == []
    rows = {r["strategy"]: r for r in result["rows"]}
    assert rows["simple"]["status"] == "FAIL" and rows["simple"]["return_delta"] == pytest.approx(0.07)
    assert rows["simple"]["sharpe_delta"] == pytest.approx(0.5)
    assert rows["buy_hold"]["status"] == "WARN" and rows["buy_hold"]["return_delta"] == pytest.approx(0.02)
    assert result["metric_deltas"] == {"SP500": {"mase_close": 0.25}}
    assert result["counts"] == {"PASS": 0, "WARN": 1, "FAIL": 1} and result["rows_hidden"] == 0
    # --strict changes nothing when the settings are the same
    assert _cli(capsys, tmp_path, "run-a", "run-b", "--strict")[0] == 1


def test_settings_that_differ_are_listed_and_exit_0_unless_strict(tmp_path, capsys):
    store = RunStore(tmp_path)
    strategies = {"simple": (0.10, 1.0), "buy_hold": (0.05, 0.5)}
    _run(store, "run-a", [_cell("run-a", 0, "SP500", {"fee": 0.001, "model": "baseline"}, strategies)])
    _run(store, "run-b", [_cell("run-b", 0, "SP500", {"fee": 0.002, "model": "toto"},
                                {"simple": (0.02, 0.2), "buy_hold": (0.05, 0.5)})])
    code, result = _cli(capsys, tmp_path, "run-a", "run-b")
    assert code == 0 and result["status"] == "SETTINGS DIFFER" and result["results"] == "FAIL"
    assert result["settings"] == [{"setting": "model", "a": "baseline", "b": "toto"},
                                  {"setting": "fee", "a": 0.001, "b": 0.002}]
    assert result["notes"][0].startswith("settings differ: model baseline vs toto, fee 0.001 vs 0.002")
    assert [r["status"] for r in result["rows"]] == ["FAIL", "PASS"]  # the rows are judged all the same
    code, strict = _cli(capsys, tmp_path, "run-a", "run-b", "--strict")
    assert code == 1 and strict["status"] == "FAIL" and strict["rows"] == result["rows"]
    capsys.readouterr()
    assert main(["runs", "compare", "run-a", "run-b", "--store", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "settings differ: model baseline vs toto, fee 0.001 vs 0.002" in out and "overall: SETTINGS DIFFER" in out


def _reference(cells_a: list[list[dict]], cells_b: list[list[dict]]) -> dict:
    """The judge in plain Python: ``compile compare`` on the ok cells keyed by label, then the lost-number rule."""
    def backtests(cells):
        out = {}
        for rows in cells:
            head = rows[0]
            if head["status"] != "ok":
                continue
            key = f"{head['symbol']} seed={head['seed']}"
            out[key] = {"symbol": key, "metrics": {"mase_close": head["metrics.mase_close"]},
                        "strategies": {r["strategy"]: {"return": r["return"], "sharpe": r["sharpe"]}
                                       for r in rows[1:]}}
        return out

    a, b = backtests(cells_a), backtests(cells_b)
    result = compare_backtests(a, b)
    gone = lambda v: v is None or not math.isfinite(v)  # noqa: E731
    for row in result["rows"]:
        sa = a[row["symbol"]]["strategies"].get(row["strategy"])
        sb = b[row["symbol"]]["strategies"].get(row["strategy"])
        if sa and sb and (gone(sa["return"]) or gone(sb["return"]) or gone(sa["sharpe"]) != gone(sb["sharpe"])):
            row["status"] = "FAIL"
    return result


def _random_runs(rng: np.random.Generator) -> tuple[list, list]:
    """Two runs of 3 symbols x 8 seeds: B's returns are A's plus noise of every size, a few NaNs, a failed
    cell, a cell A lacks, a strategy B lacks."""
    cells_a, cells_b = [], []
    for i, (symbol, seed) in enumerate((s, k) for s in ("SP500", "NASDAQ", "DOW") for k in range(8)):
        settings = {"fee": 0.001, "seed": seed}
        ret = rng.normal(0, 0.1, size=3)
        noise = rng.choice([0.0, 0.005, 0.02, 0.08], size=3) * rng.choice([-1, 1], size=3)
        sharpe = rng.normal(size=3)
        names = ["simple", "buy_hold", "maxdiff"]
        a = {n: (float(ret[j]), float(sharpe[j])) for j, n in enumerate(names)}
        b = {n: (float(ret[j] + noise[j]), float(sharpe[j])) for j, n in enumerate(names)}
        if i == 3:
            b["simple"] = (float("nan"), b["simple"][1])
        if i == 5:
            b["maxdiff"] = (b["maxdiff"][0], float("nan"))
        if i == 7:
            del b["buy_hold"]
        if i != 9:  # A lacks this cell
            cells_a.append(_cell("run-a", i, symbol, settings, a, mase=float(rng.random())))
        cells_b.append(_cell("run-b", i, symbol, settings, None if i == 11 else b, mase=float(rng.random()),
                             error="boom" if i == 11 else None))
    return cells_a, cells_b


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_duckdb_join_matches_the_python_judge_row_for_row(tmp_path, seed):
    cells_a, cells_b = _random_runs(np.random.default_rng(seed))
    store = RunStore(tmp_path)
    _run(store, "run-a", cells_a)
    _run(store, "run-b", cells_b)
    expected = _reference(cells_a, cells_b)
    got = compare_runs(store, "run-a", "run-b", show_all=True)
    assert got["rows"] == expected["rows"] and len(got["rows"]) > 40
    assert got["metric_deltas"] == {k: v for k, v in expected["metric_deltas"].items()}
    assert got["status"] == got["results"] == max((r["status"] for r in expected["rows"]),
                                                  key=["PASS", "WARN", "FAIL"].index)
    assert "NASDAQ seed=3: failed in run-b: boom" in got["notes"] and "NASDAQ seed=1: only in B" in got["notes"]
    assert "NASDAQ seed=3: only in A" in got["notes"]
    assert "SP500 seed=7: strategy 'buy_hold' only in A" in got["notes"]
    assert "SP500 seed=3: simple: return is NaN in B" in got["notes"]
    assert "SP500 seed=5: maxdiff: sharpe is NaN in B only" in got["notes"]
    assert got["matched_on"] == ["symbol", "seed"] and got["settings"] == []
    # without --all: the same judgement, the PASS rows counted, not listed
    hidden = compare_runs(store, "run-a", "run-b", shown=40)
    passed = sum(r["status"] == "PASS" for r in expected["rows"])
    assert hidden["rows"] == [r for r in expected["rows"] if r["status"] != "PASS"]
    assert hidden["rows_hidden"] == passed == hidden["counts"]["PASS"] and hidden["status"] == got["status"]
    assert sum(hidden["counts"].values()) == len(expected["rows"])
    assert set(hidden["metric_deltas"]) == {r["symbol"] for r in hidden["rows"]}
