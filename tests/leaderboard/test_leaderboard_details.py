"""The leaderboard's details: windows/s after a warm-up call, "no trades" where nothing was measured, and the
best model row of each ranked column marked with the direction of better, alike in terminal, HTML and JSON."""

from __future__ import annotations

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.strategies import FORECAST_DRIVEN
from marketcast.data import load_symbol
from marketcast.forecast.baseline import BaselineForecaster
from marketcast.leaderboard import compare as compare_module
from marketcast.leaderboard.compare import ModelRun, model_row, run_model
from marketcast.report.leaderboard import (BEST_MARK, COLUMNS, NO_TRADES, best, cells, headers,
                                           leaderboard_section, marked_cells)


class Clock:
    """A clock that only the forecaster moves: 100 s on its first call, 1 s on every later one."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class SlowFirstCall(BaselineForecaster):
    """The baseline, whose first call "sleeps" 100 s on the test's clock (a compile), later calls 1 s."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock, self.calls = clock, []

    def forecast(self, batch, horizon, num_samples, seed=0):
        self.calls.append((len(batch.values), self.clock.now))
        self.clock.now += 100.0 if len(self.calls) == 1 else 1.0
        return super().forecast(batch, horizon, num_samples, seed=seed)


def test_windows_per_second_excludes_a_slow_first_call(monkeypatch):
    clock = Clock()
    forecaster = SlowFirstCall(clock)
    monkeypatch.setattr(compare_module, "load_forecaster", lambda *a, **k: forecaster)
    config = BacktestConfig(windows=6, context=64, num_samples=16, strategies=FORECAST_DRIVEN)
    run = run_model("baseline", [load_symbol("SP500")], config, weights=None, device="cpu", dtype="float32",
                    clock=clock)
    # call 1: the one-window warm-up at t=0; call 2: the backtest's one batched call at t=100 (its windows and
    # the next bar's); later calls (the fans, drawn after the clock stops) are not timed
    assert forecaster.calls[0] == (1, 0.0) and forecaster.calls[1][1] == 100.0 and forecaster.calls[1][0] > 1
    assert (run.load_s, run.warmup_s, run.run_s, run.windows) == (0.0, 100.0, 1.0, 6)
    assert model_row(run)["cost"]["windows_per_s"] == 6.0  # 6 windows / 1 s, not 6 / 101 s


def _row(model, mase, coverage, sharpe, trades, win_s, drawdown=-0.1):
    return {"model": model, "weights_source": "none", "random_weights": False,
            "skill": {"mase": mase, "crps": 0.01, "coverage80": coverage},
            "trading": {"sharpe": sharpe, "sharpe_ci_low": None if sharpe is None else sharpe - 1,
                        "sharpe_ci_high": None if sharpe is None else sharpe + 1,
                        "dsr": None if sharpe is None else 0.5, "max_drawdown": drawdown, "trades": trades},
            "cost": {"windows_per_s": win_s, "peak_memory_mb": 100.0, "memory_kind": "rss", "load_s": 0.5,
                     "device": "cpu"}}


def test_zero_trades_read_no_trades_in_json_terminal_and_html():
    row = model_row(ModelRun(model="toto", weights=None, source="hub", device="cpu", dtype="float32", results=[],
                             load_s=0.5, run_s=2.0, peak_memory=2**20, memory_kind="rss"))
    assert row["trading"]["trades"] == 0
    assert [row["trading"][k] for k in ("sharpe", "sharpe_ci_low", "sharpe_ci_high", "dsr")] == [None] * 4
    texts = cells(_row("a", 1.0, 0.8, None, 0, 10.0))
    assert texts[COLUMNS.index("Sharpe [95% CI]")] == NO_TRADES and texts[COLUMNS.index("trades")] == "0"
    assert "+0.00 [—, —]" not in texts
    assert f"<td>{NO_TRADES}</td>" in leaderboard_section([_row("a", 1.0, 0.8, None, 0, 10.0)])


def test_best_row_per_column_with_the_direction_of_better():
    rows = [_row("a", 0.90, 0.70, 0.50, 12, 40.0, drawdown=-0.20),
            _row("b", 1.10, 0.85, 1.20, 30, 10.0, drawdown=-0.05),
            _row("c", 1.30, 0.80, None, 0, 40.0, drawdown=-0.30)]  # no trades: never best on Sharpe or DSR
    winners = best(rows)
    # MASE: lowest 0.90; cov80: nearest 0.80 is c's 0.80 exactly; Sharpe: b's 1.20 (c measured nothing);
    # max DD: the least negative, b's -5 %; win/s: a and c tie at 40; CRPS, peak MB, load s: every model ties
    assert winners["MASE"] == ["a"] and winners["cov80"] == ["c"] and winners["Sharpe [95% CI]"] == ["b"]
    assert winners["DSR"] == ["a", "b"] and winners["max DD"] == ["b"] and winners["win/s"] == ["a", "c"]
    assert winners["load s"] == ["a", "b", "c"]
    assert "trades" not in winners and "weights" not in winners
    marked = marked_cells(rows)
    assert marked[0][COLUMNS.index("MASE")] == "0.900" + BEST_MARK
    assert marked[1][COLUMNS.index("MASE")] == "1.100"
    assert marked[1][COLUMNS.index("Sharpe [95% CI]")] == "+1.20 [+0.20, +2.20]" + BEST_MARK
    assert marked[2][COLUMNS.index("Sharpe [95% CI]")] == NO_TRADES
    heads = headers()
    assert heads[COLUMNS.index("MASE")] == "MASE ↓" and heads[COLUMNS.index("Sharpe [95% CI]")] == "Sharpe [95% CI] ↑"
    assert heads[COLUMNS.index("cov80")] == "cov80 →0.80" and heads[COLUMNS.index("trades")] == "trades"
    page = leaderboard_section(rows)
    assert "<th>MASE ↓</th>" in page and f"<td>0.900{BEST_MARK}</td>" in page and "↑ higher is better" in page
