"""Multiple testing across a sweep's cells: every cell is a trial; the best cell's DSR deflates by their count.

The store holds synthetic cells written with the store's own writer and the cell row's own trial columns
(:func:`marketcast.runs.rows.trial_columns`), so the answers are known by hand.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone
from statistics import NormalDist, variance
from types import SimpleNamespace

import numpy as np
import pytest

from marketcast.backtest import overfit
from marketcast.commands import main
from marketcast.runs import overview
from marketcast.runs.overview import selection
from marketcast.runs.rows import trial_columns
from marketcast.runs.store import RunStore

WINDOWS = 64
SETTLES = [datetime(2024, 1, 1, tzinfo=timezone.utc) + timedelta(days=k) for k in range(WINDOWS)]


def _store(tmp_path, returns_by_cell: list[np.ndarray], symbols=("AAA",), run_id="sweep-test") -> RunStore:
    """One sweep run: cell k has walk-forward returns ``returns_by_cell[k]``; seeds x fill modes x points."""
    store = RunStore(tmp_path / "runs")
    store.write_info(run_id, {"kind": "sweep", "created_at": "2026-01-01T00:00:00",
                              "cells_total": len(returns_by_cell)})
    rows = []
    per_symbol = len(returns_by_cell) // len(symbols)
    for k, r in enumerate(returns_by_cell):
        j = k % per_symbol
        shared = {"run_id": run_id, "cell_id": f"c{k:03d}", "cell_index": k, "kind": "sweep", "status": "ok",
                  "error": None, "symbol": symbols[k // per_symbol], "seed": j // 4,
                  "fill_mode": ("touch", "penetrate")[j % 2], "point": ("median", "mean")[(j // 2) % 2],
                  "settle_times": SETTLES}
        result = SimpleNamespace(walk_forward={"returns": r}, periods_per_year=252.0)
        rows.append({**shared, "strategy": None, **trial_columns(result), "record": "{}"})
        rows.append({**shared, "strategy": "simple", "return": float(np.prod(1 + r) - 1), "sharpe": 0.0,
                     "max_drawdown": 0.0, "returns": [float(x) for x in r]})
    store.write_rows(run_id, rows)
    return store


def _by_hand(matrix: np.ndarray) -> tuple[float, float, int]:
    """(DSR of the best column, V[SR], best column) from the paper's formula, written out here."""
    sharpes = [float(c.mean() / c.std(ddof=1)) for c in matrix.T]
    n, v = len(sharpes), variance(sharpes)
    best = int(np.argmax(sharpes))
    gamma, z = 0.5772156649015329, NormalDist()
    sr0 = math.sqrt(v) * ((1 - gamma) * z.inv_cdf(1 - 1 / n) + gamma * z.inv_cdf(1 - 1 / (n * math.e)))
    r = matrix[:, best]
    sr = sharpes[best]
    g3 = float(np.mean(((r - r.mean()) / r.std()) ** 3))
    g4 = float(np.mean(((r - r.mean()) / r.std()) ** 4))
    dsr = z.cdf((sr - sr0) * math.sqrt(len(r) - 1) / math.sqrt(1 - g3 * sr + (g4 - 1) / 4 * sr**2))
    return dsr, v, best


def test_a_sweep_of_100_noise_cells_reports_100_trials_and_a_dsr_equal_to_the_formula(tmp_path, capsys):
    rng = np.random.default_rng(7)
    matrix = rng.normal(0.0, 0.01, (WINDOWS, 100))
    store = _store(tmp_path, list(matrix.T))
    (run,) = selection(store, "sweep-test")
    dsr, v, best = _by_hand(matrix)
    assert run["scope"] == "run" and run["trials"] == 100 and run["best_cell"] == f"c{best:03d}"
    assert run["sharpe_variance"] == pytest.approx(v, rel=1e-12) and run["dsr"] == pytest.approx(dsr, rel=1e-9)
    # the same through overfit.py's own functions, from the Sharpe ratios the store holds
    stored = store.query('SELECT "walk_forward.sharpe_per_period" AS sr, "walk_forward.observations" AS t, '
                         '"walk_forward.skew" AS g3, "walk_forward.kurtosis" AS g4 FROM cells ORDER BY sr DESC')
    sr0 = overfit.expected_max_sharpe(100, float(np.var(stored["sr"], ddof=1)))
    top = stored.iloc[0]
    assert run["dsr"] == pytest.approx(overfit.deflated_sharpe(top.sr, int(top.t), top.g3, top.g4, sr0), rel=1e-12)
    assert run["pbo"] == pytest.approx(overfit.cscv(matrix, 16).pbo) and run["cscv_splits"] == 16
    assert dsr < 0.95 and run["verdict"].startswith(f"the best of 100 cells is not distinguishable from luck "
                                                    f"(DSR {dsr:.2f}")

    capsys.readouterr()
    assert main(["runs", "show", "sweep-test", "--store", str(store.root)]) == 0
    out = capsys.readouterr().out
    assert "run: 100 trials (cells); best cell AAA " in out and f"DSR {dsr:.2f}" in out
    assert f"the run: the best of 100 cells is not distinguishable from luck (DSR {dsr:.2f}" in out
    assert main(["runs", "show", "sweep-test", "--store", str(store.root), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["selection"]
    assert shown[0]["trials"] == 100 and shown[0]["dsr"] == pytest.approx(dsr, rel=1e-9)


def test_one_planted_edge_among_noise_survives_deflation(tmp_path):
    rng = np.random.default_rng(3)
    matrix = rng.normal(0.0, 0.01, (WINDOWS, 40))
    matrix[:, 17] += 0.006
    (run,) = selection(_store(tmp_path, list(matrix.T)), "sweep-test")
    assert run["best_cell"] == "c017" and run["trials"] == 40
    assert run["dsr"] > 0.95 and run["pbo"] < 0.1 and run["verdict"] is None


def test_a_sweep_over_symbols_reports_the_run_and_each_symbol(tmp_path):
    rng = np.random.default_rng(11)
    matrix = rng.normal(0.0, 0.01, (WINDOWS, 100))
    figures = selection(_store(tmp_path, list(matrix.T), symbols=("AAA", "BBB")), "sweep-test")
    assert [(f["scope"], f["trials"]) for f in figures] == [("run", 100), ("AAA", 50), ("BBB", 50)]
    assert figures[0]["dsr"] == pytest.approx(_by_hand(matrix)[0], rel=1e-9)
    assert figures[1]["dsr"] == pytest.approx(_by_hand(matrix[:, :50])[0], rel=1e-9)
    assert figures[2]["dsr"] == pytest.approx(_by_hand(matrix[:, 50:])[0], rel=1e-9)
    assert figures[1]["best_label"].startswith("AAA ")
    assert figures[1]["pbo"] == pytest.approx(overfit.cscv(matrix[:, :50], 16).pbo)


def test_many_symbols_keep_the_screen_short_and_skip_per_symbol_pbo(tmp_path, monkeypatch):
    monkeypatch.setattr(overview, "MAX_SYMBOL_LINES", 1)
    matrix = np.random.default_rng(5).normal(0.0, 0.01, (WINDOWS, 20))
    figures = selection(_store(tmp_path, list(matrix.T), symbols=("AAA", "BBB")), "sweep-test")
    assert figures[0]["pbo"] is not None and figures[1]["pbo"] is None and "up to 1 symbols" in figures[1]["pbo_note"]
    lines = overview.selection_lines(figures)
    assert lines[0].startswith("run: 20 trials") and lines[1].startswith("AAA: 10 trials")
    assert lines[2] == "... and 1 more symbols (runs show --json lists them)" and not any(x.startswith("BBB") for x in lines)


def test_the_screen_computes_only_the_symbols_it_shows_and_says_how_many_there_are(tmp_path, monkeypatch):
    monkeypatch.setattr(overview, "MAX_SYMBOL_LINES", 1)
    matrix = np.random.default_rng(5).normal(0.0, 0.01, (WINDOWS, 30))
    store = _store(tmp_path, list(matrix.T), symbols=("AAA", "BBB", "CCC"))
    every, shown = selection(store, "sweep-test"), selection(store, "sweep-test", symbols=1)
    assert [f["scope"] for f in every] == ["run", "AAA", "BBB", "CCC"] and [f["scope"] for f in shown] == ["run", "AAA"]
    assert shown[0] == {**every[0], "symbols": 3} and shown[1] == every[1]
    assert overview.selection_lines(shown) == overview.selection_lines(every)  # the same screen
    assert overview.selection_lines(shown)[2] == "... and 2 more symbols (runs show --json lists them)"
