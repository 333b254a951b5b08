"""A restart decides as an uninterrupted run, for every symbol (issue 53 item 4): the embedded SP500 beside two
synthetic 24/7 series of about 360 days that start after it (fewer bars than the planner's 512-bar context),
``trade replay --hold`` with every gate open, replayed straight, stopped and resumed at two dates, and SIGKILLed 5
times at random points and restarted: the same orders, fills and equity curve.

Before the fix the planner rebuilt a young series' backtest on a restart from the last 69 windows, where the
uninterrupted run carried it from its first window (MaxDiff's learned offsets sum every window since): stopped on
2015-04-20 and 2015-05-10, this replay ended at 88,793.22 with 74 orders and 44 fills instead of 90,898.58 with 72
and 41 (the first difference BTCUSD's pick on 2015-05-26: maxdiff straight, unprofit_shutdown resumed); killed
5 times at spread points, its books differed too (a BTCUSD sale sent on 2015-05-19 instead of 2015-05-18)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from marketcast.data import load_symbol
from marketcast.data.bars import Bars
from marketcast.forecast.baseline import BaselineForecaster
from marketcast.trade.loop.planner import BROKER_HISTORY, BacktestPlanner
from marketcast.trade.test_kit.synthetic import crypto_frame
from marketcast.trade.venues.paper import PaperBroker

SRC = str(Path(__file__).resolve().parents[2] / "src")
START, END, STOPS = "2015-04-01", "2015-05-31", ("2015-04-20", "2015-05-10")
# two young 24/7 series: 71 and 50 bars on the first decision day, 130 and 110 on the last
CRYPTO = {"ETHUSD": ("2015-01-20", "2016-01-13", 5), "BTCUSD": ("2015-02-10", "2016-02-03", 11)}
CONFIG = ('[trade]\nsymbols = ["SP500", "ETHUSD", "BTCUSD"]\n'
          '[trade.gates]\nmin_edge = -1.0\nmin_sharpe = -1e9\nmax_drawdown = 1.01\n')
KILLS = 5


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("restart")
    (root / "data").mkdir()
    load_symbol("SP500").frame.to_csv(root / "data" / "SP500.csv")
    for symbol, (first, last, seed) in CRYPTO.items():
        crypto_frame(first, last, seed=seed).to_csv(root / "data" / f"{symbol}.csv")
    (root / "marketcast.toml").write_text(CONFIG)
    return root


def _replay(folder: Path, state: str, end: str = END) -> subprocess.Popen:
    args = ["trade", "replay", "--from", START, "--to", end, "--hold", "--data-dir", "data", "--asset-class",
            "ETHUSD=crypto", "--asset-class", "BTCUSD=crypto", "--state-dir", state]
    return subprocess.Popen([sys.executable, "-m", "marketcast.commands", *args], cwd=folder,
                            env=dict(os.environ, PYTHONPATH=SRC), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def _finish(proc: subprocess.Popen) -> None:
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err


def _books(folder: Path, state: str) -> dict:
    bars = {"SP500": load_symbol("SP500")}
    bars.update({s: Bars(s, crypto_frame(a, b, seed=k), "crypto", "test") for s, (a, b, k) in CRYPTO.items()})
    broker = PaperBroker(folder / state / "broker.db", bars, hold=True)
    books = {"orders": [(o.client_order_id, o.symbol, o.status, o.side, o.qty, o.limit_price, o.take_profit,
                         o.submitted_at) for o in broker.orders(limit=10**6)],
             "fills": [(f.client_order_id, f.side, f.qty, f.price, f.fee, f.timestamp) for f in broker.fills()],
             "equity": broker.equity_curve()}
    broker.close()
    return books


@pytest.fixture(scope="module")
def straight(folder) -> dict:
    _finish(_replay(folder, "straight"))
    books = _books(folder, "straight")
    symbols = {o[1] for o in books["orders"]}
    # enough to decide on: every symbol traded, dozens of fills, the curve through the last day
    assert symbols == {"SP500", "ETHUSD", "BTCUSD"} and len(books["fills"]) >= 30, (symbols, len(books["fills"]))
    assert f"{books['equity'].index[-1]:%Y-%m-%d}" == END
    return books


def test_a_replay_stopped_and_resumed_at_two_dates_ends_as_the_straight_one(folder, straight):
    for end in (*STOPS, END):
        _finish(_replay(folder, "stopped", end))
    stopped = _books(folder, "stopped")
    assert stopped["orders"] == straight["orders"] and stopped["fills"] == straight["fills"]
    assert stopped["equity"].equals(straight["equity"])


MARGIN = 30  # cycles left after the last kill's target


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_replay_killed_five_times_ends_as_the_straight_one(folder, straight):
    records = folder / "killed" / "records.jsonl"
    total = _lines(folder / "straight" / "records.jsonl")  # one record a cycle: 101 (60 crypto days, 41 sessions)
    rng = random.Random(53)
    # a kill in each fifth of the replay, after a random count of cycles and a random moment into the next one:
    # the later ones restart a young series that holds more than the planner's 70 windows
    # The targets stop MARGIN cycles short of the end and the pause into a cycle is at most 50 ms, so that a fast
    # machine (a cycle in under 20 ms) still has cycles left to kill: the kill must land while the replay runs.
    span = total - 10 - MARGIN
    targets = [rng.randrange(10 + k * span // KILLS, 10 + (k + 1) * span // KILLS) for k in range(KILLS)]
    for target in targets:
        proc = _replay(folder, "killed")
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline and _lines(records) < target:
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.05))
        assert proc.poll() is None, "every kill must land while the replay runs"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        assert _lines(records) < total
    _finish(_replay(folder, "killed"))
    killed = _books(folder, "killed")
    assert killed["orders"] == straight["orders"] and killed["fills"] == straight["fills"]
    assert killed["equity"].equals(straight["equity"])


@settings(max_examples=200, deadline=None)
@given(bars=st.integers(5, 700), start=st.integers(-30, 700), later=st.integers(0, 400))
def test_the_first_window_is_the_same_at_the_first_plan_and_at_any_later_one(bars, start, later):
    """The invariant a restart rests on: the window the symbol's backtest starts from, computed at its first plan
    (the first bar at or after the loop's first cycle that holds enough bars), is the one computed on any later
    bar, for a file that starts before, at or after the loop's first cycle (``start``: its row, negative when the
    file starts later), shorter than the broker feed's history (a longer one may have been cut: first_window)."""
    planner = BacktestPlanner(BaselineForecaster())
    index = pd.date_range("2015-01-01", periods=bars + later, freq="D", tz="UTC", name="timestamp")
    frame = pd.DataFrame({c: 1.0 for c in ("open", "high", "low", "close")}, index=index)
    learn_from = (index[0] + pd.Timedelta(days=start)).isoformat()
    first_plan = max(start, planner._need + 1)  # a plan on fewer bars is warming up (flat, no backtest)
    assume(first_plan < bars and bars + later < BROKER_HISTORY)
    head = Bars("X", frame.iloc[:first_plan + 1], "crypto")
    now = Bars("X", frame.iloc[:bars + later], "crypto")
    assert planner.first_window(head, learn_from) == planner.first_window(now, learn_from)
