"""Replay over embedded history: fills equal the backtest's settle, decisions equal the planner's, the CLI
runs a year in well under a minute and writes the PNG and records."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from marketcast.backtest.fills import settle
from marketcast.backtest.orders import Bar, Costs, Decision
from marketcast.data import load_symbol
from marketcast.forecast import load_forecaster
from marketcast.trade.cycle import LoopConfig
from marketcast.trade.paper import PaperBroker
from marketcast.trade.planner import MaxDiffPlanner
from marketcast.trade.replay import replay
from marketcast.trade.state import Journal

SRC = str(Path(__file__).resolve().parents[2] / "src")
SYMS = ("SP500", "NASDAQ")


def test_replay_fills_equal_settle_on_the_same_decisions_and_bars(tmp_path):
    bars = {s: load_symbol(s) for s in SYMS}
    planner = MaxDiffPlanner(load_forecaster("baseline"))
    result = replay(bars, planner, tmp_path, "2016-01-01", "2016-06-30", LoopConfig(SYMS))
    journal = Journal(tmp_path / "journal.db")
    broker = PaperBroker(tmp_path / "broker.db", bars)
    intents = [i for i in journal.intents() if i.status == "submitted"]
    assert len(intents) >= 20
    fills = {}
    for f in broker.fills():
        fills.setdefault(f.client_order_id, []).append(f)
    pnl_total, filled = 0.0, 0
    for i in intents:
        d = json.loads(i.decision)
        decision = Decision(d["side"], d["entry_limit"], d["take_profit"])
        frame = bars[i.symbol].frame
        pos = frame.index.get_loc(pd.Timestamp(i.decision_ts))
        nxt = frame.iloc[pos + 1]
        s = settle(decision, Bar(nxt.open, nxt.high, nxt.low, nxt.close), Costs.for_asset("stock"))
        got = fills.get(i.client_order_id, [])
        if not s.filled:
            assert got == [] and broker.order_by_client_id(i.client_order_id).status == "expired"
            continue
        filled += 1
        entry, exit_ = got
        assert entry.timestamp == exit_.timestamp == frame.index[pos + 1].isoformat()
        assert (entry.price, exit_.price, exit_.kind) == (s.entry_price, s.exit_price, s.exit_reason)
        pnl = decision.side * i.qty * (exit_.price - entry.price) - entry.fee - exit_.fee
        assert pnl == pytest.approx(i.qty * s.entry_price * s.net_return, abs=1e-9)
        pnl_total += pnl
        if filled <= 3:  # the journal's decision is the planner's decision for that bar
            cut = bars[i.symbol].head(pos + 1)
            cut = type(cut)(cut.symbol, cut.frame.iloc[-300:], cut.asset_class, cut.source)
            assert planner.plan(cut, Costs.for_asset("stock")).decision == decision
    assert 5 <= filled < len(intents)  # some limits filled, some did not
    assert broker.account().cash == pytest.approx(100_000 + pnl_total, abs=1e-6)
    assert result.equity.iloc[-1] == pytest.approx(broker.account().cash)


def test_cli_replay_a_year_then_status(tmp_path):
    env = dict(os.environ, PYTHONPATH=SRC)
    state = tmp_path / "state"
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "marketcast.trade", "replay", "--from", "2017-01-01", "--to",
                          "2017-12-31", "--state-dir", str(state)], capture_output=True, text=True, env=env,
                         timeout=120)
    wall = time.perf_counter() - started
    assert out.returncode == 0, out.stderr
    assert wall < 60, f"year replay took {wall:.1f}s"
    assert "250 cycles run" in out.stdout
    png = state / "equity.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    records = [json.loads(x) for x in (state / "records.jsonl").read_text().splitlines()]
    assert len(records) == 250
    assert {"forecast_latency_s", "compile_mode", "recompiles_since_start", "fallbacks_to_eager", "peak_memory_mb",
            "quotes", "orders_submitted", "orders_filled", "orders_cancelled", "equity"} <= set(records[0])
    assert records[0]["quotes"] == {"real": 0, "synthetic": 2, "none": 0}
    status = subprocess.run([sys.executable, "-m", "marketcast.trade", "status", "--state-dir", str(state)],
                            capture_output=True, text=True, env=env, timeout=60)
    assert status.returncode == 0, status.stderr
    assert "cycles" in status.stdout and "250" in status.stdout
    submitted = sum(r["orders_submitted"] for r in records)
    shown = re.search(r"orders_submitted\s*│\s*(\d+)", status.stdout)
    assert shown and int(shown.group(1)) == submitted > 0


def test_replay_rejects_inverted_dates(tmp_path):
    env = dict(os.environ, PYTHONPATH=SRC)
    out = subprocess.run([sys.executable, "-m", "marketcast.trade", "replay", "--from", "2017-05-01", "--to",
                          "2017-01-01", "--state-dir", str(tmp_path)], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 2 and "must be after" in out.stderr
