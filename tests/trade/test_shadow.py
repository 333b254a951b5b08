"""Shadow promotion on the paper broker: the candidate plans on the live loop's bars, orders nothing, and is
promoted only when a paired test says it is better; a SIGKILL during a promotion leaves one active model."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from jsonschema import Draft202012Validator
from scipy.stats import ttest_rel

from marketcast.backtest.orders import FLAT, Costs, Decision
from marketcast.trade.journal import sequential
from marketcast.data import load_symbol
from marketcast.trade.venues.paper import PaperBroker
from marketcast.trade.journal.state import Journal
from marketcast.trade.loop.cycle import LoopConfig, TradingLoop
from marketcast.trade.loop.feed import history_feed
from marketcast.trade.risk.gates import GateConfig
from marketcast.trade.loop.planner import Signal
from marketcast.trade.loop.shadow import Shadow, active_weights, compare, promote
from marketcast.schemas import load as load_schema

from .helpers import LongPlanner

SRC = str(Path(__file__).resolve().parents[2] / "src")


def trade(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "marketcast.commands", "trade", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": SRC, "COLUMNS": "250"})

SYMS = ("SP500", "NASDAQ")
OPEN_GATES = GateConfig(min_edge=-1.0, min_sharpe=-1e9, max_drawdown=1.01)
DAYS = 60  # 59 settled bars x 2 symbols = 118 paired decisions: past the 20-day warm-up of the promotion test
WRONG_EVERY = 10


@pytest.fixture(scope="module")
def bars():
    return {s: load_symbol(s) for s in SYMS}


class NextBarPlanner:
    """Knows the next bar's direction from the full history it was built with (``sign`` 1) or bets against it
    (``sign`` -1): a candidate whose true quality is known, planning from the bars the loop hands it. ``sign`` 1
    is wrong on every :data:`WRONG_EVERY`-th bar of the file: a shadow that never loses a day is never promoted
    (the promotion test has no estimate of its downside), so the better candidate loses some days."""

    def __init__(self, full, sign: int) -> None:
        self.full, self.sign, self.model = full, sign, f"oracle{sign:+d}"

    def plan(self, bars, costs, learn_from=None) -> Signal:
        frame = self.full[bars.symbol].frame
        i = int(frame.index.get_loc(bars.frame.index[-1]))
        close = float(frame["close"].iloc[i])
        move = np.sign(frame["close"].iloc[i + 1] - close) if i + 1 < len(frame) else 0.0
        side = int(self.sign * move * (-1 if self.sign > 0 and i % WRONG_EVERY == 0 else 1))
        return Signal(bars.symbol, bars.frame.index[-1].isoformat(), "next", Decision(side or FLAT), close,
                      {"edge": 0.0, "sharpe": 0.0, "max_drawdown": 0.0, "total_return": 0.0})


def run_days(tmp_path, bars, sign: int | None):
    broker = PaperBroker(tmp_path / "broker.db", bars, start="2017-03-01")
    journal = Journal(tmp_path / "journal.db")
    loop = TradingLoop(broker, journal, LongPlanner(), history_feed(bars, lambda: broker.clock),
                       LoopConfig(SYMS, gates=OPEN_GATES))
    if sign is not None:
        loop.shadow = Shadow(journal, NextBarPlanner(bars, sign), f"candidate{sign:+d}.pt", "base.pt")
    days = bars["SP500"].frame.loc["2017-03-01":].index[:DAYS]
    for day in days:
        broker.advance_to(day)
        loop.run_cycle(broker.clock)
    return broker, journal, days


def closes(bars, days):
    return {s: bars[s].frame["close"].reindex(days).to_numpy() for s in SYMS}


def test_a_better_candidate_is_promoted_and_sends_no_order(tmp_path, bars):
    broker, journal, days = run_days(tmp_path / "shadow", bars, 1)
    plain, _, _ = run_days(tmp_path / "plain", bars, None)
    assert broker.submit_log() == plain.submit_log()  # the same orders, byte for byte: the shadow sent none
    ours = {i.client_order_id for i in journal.intents()}
    assert {cid for cid, _ in broker.submit_log()} <= ours
    result = compare(journal)
    # by hand: live is long every bar, the shadow takes the next bar's sign but on every WRONG_EVERY-th bar
    c = closes(bars, days)
    r = np.concatenate([c[s][1:] / c[s][:-1] - 1 for s in SYMS])
    wrong = np.concatenate([bars[s].frame.index.get_indexer(days[:-1]) % WRONG_EVERY == 0 for s in SYMS])
    paper = np.where(wrong, -np.abs(r), np.abs(r))
    assert result.n == len(r) == 2 * (DAYS - 1) and 0 < wrong.sum() < len(r)
    assert result.live_pnl == pytest.approx(r.sum()) and result.shadow_pnl == pytest.approx(paper.sum())
    assert result.p == pytest.approx(ttest_rel(paper, r, alternative="greater").pvalue)
    assert active_weights(journal) is None
    journal.close()
    status = json.loads(trade("status", "--state-dir", str(tmp_path / "shadow"), "--json").stdout)
    schema = load_schema("trade_status")
    Draft202012Validator(schema).validate(status)
    shown = status["shadow"]
    assert shown["weights"] == "candidate+1.pt" and shown["decisions"] == result.n
    assert shown["shadow_pnl"] == pytest.approx(result.shadow_pnl) and shown["p"] == pytest.approx(result.p)
    table = " ".join(trade("status", "--state-dir", str(tmp_path / "shadow")).stdout.split())
    assert "shadow candidate+1.pt" in table and f"{result.n} settled decisions" in table
    assert f"paper P&L {result.shadow_pnl:+.4%} vs live {result.live_pnl:+.4%}" in table
    done = trade("promote", "--state-dir", str(tmp_path / "shadow"))
    assert done.returncode == 0 and "promoted candidate+1.pt" in done.stdout and result.p < 0.05
    journal = Journal(tmp_path / "shadow" / "journal.db")
    assert active_weights(journal) == "candidate+1.pt"
    row = journal.conn.execute("SELECT old, new, n_pairs FROM promotions").fetchall()
    assert [tuple(x) for x in row] == [(None, "candidate+1.pt", result.n)]
    # after the swap the old comparison no longer counts: its live rows were not the active model
    assert compare(journal).n == 0


def test_a_worse_candidate_is_refused_with_its_statistics(tmp_path, bars):
    _, journal, days = run_days(tmp_path, bars, -1)
    c = closes(bars, days)
    r = np.concatenate([c[s][1:] / c[s][:-1] - 1 for s in SYMS])
    ok, line, result = promote(journal)
    assert not ok and active_weights(journal) is None
    refused = trade("promote", "--state-dir", str(tmp_path))
    assert refused.returncode == 1 and line in " ".join(refused.stdout.split())
    # by hand: one observation a day, both symbols summed, each decision less the backtest's round trip
    costs = {s: Costs.for_asset(bars[s].asset_class, periods_per_year=bars[s].periods_per_year) for s in SYMS}
    daily = sum((-np.abs(x) - [costs[s].round_trip(int(-np.sign(v))) if v else 0.0 for v in x])
                - (x - costs[s].round_trip(1)) for s, x in ((s, c[s][1:] / c[s][:-1] - 1) for s in SYMS))
    assert result.test.n == DAYS - 1 and result.mean_diff == pytest.approx(daily.mean(), rel=1e-12)
    assert result.test.e_value == pytest.approx(sequential.evaluate(daily, 0.05).e_value, rel=1e-9)
    assert f"n={len(r)} paired" in line and f"n={DAYS - 1} days" in line and f"{result.mean_diff:+.6f}" in line
    # a worse shadow: its mean never turned positive, so the test never bet (e-value 1, no lower bound)
    assert result.test.e_value == 1.0 and result.test.low == -np.inf and not result.test.passes and result.p == 1.0
    # too few decisions is refused before the test, and says how many
    ok, line, _ = promote(journal, min_decisions=1000)
    assert not ok and f"{len(r)} of 1000 decisions" in line


KILLER = textwrap.dedent("""
    import sys
    from marketcast.trade.journal.state import Journal
    from marketcast.trade.loop.shadow import Comparison, swap
    journal = Journal(sys.argv[1])
    k = 0
    while True:
        swap(journal, "a.pt" if k % 2 else "b.pt", Comparison(60, 0.0, 1.0, 0.01, 0.001))
        k += 1
        if k == 1:
            print("ready", flush=True)
""")


def test_sigkill_during_promotion_leaves_exactly_one_active_model(tmp_path):
    script = tmp_path / "swapper.py"
    script.write_text(KILLER)
    rng = random.Random(35)
    for run in range(10):
        path = tmp_path / f"journal{run}.db"
        proc = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.0, 0.15))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        conn = sqlite3.connect(path)
        rows = conn.execute("SELECT weights FROM active_model").fetchall()
        last = conn.execute("SELECT new FROM promotions ORDER BY n DESC LIMIT 1").fetchone()
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
        assert len(rows) == 1 and rows[0][0] in ("a.pt", "b.pt")
        assert rows[0][0] == last[0]  # the swap and its record committed together
        assert active_weights(Journal(path)) == rows[0][0]


def test_a_shadow_of_the_baseline_is_refused_before_any_state(tmp_path):
    run = trade("run", "--once", "--shadow", "tuned.pt", "--state-dir", str(tmp_path / "state"))
    assert run.returncode == 2 and "--shadow tuned.pt: the baseline model has no weights" in run.stderr + run.stdout
    assert "Traceback" not in run.stderr and not (tmp_path / "state" / "journal.db").exists()
