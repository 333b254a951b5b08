"""Live sizing: the planner sizes each signal as the backtest sizes that window's order (its carried record is
the sized backtest's, so its pick is the backtest's walk-forward pick), the portfolio multiplies the quantity it
would have sent by the size under the same caps, and the settings reach the planner."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from marketcast.backtest import run_backtest
from marketcast.backtest.orders import FLAT, Costs, Decision
from marketcast.data import load_symbol
from marketcast.errors import ConfigError
from marketcast.forecast import load_forecaster
from marketcast.settings import resolve
from marketcast.commands import trade_settings as cfg
from marketcast.commands.trade_settings import SECTION, SETTINGS
from marketcast.trade.loop.planner import PLANNER_CONFIG, BacktestPlanner, Signal
from marketcast.trade.risk.portfolio import PortfolioConfig, allocate
from marketcast.trade.risk.limits import RiskLimits

from .helpers import signal


def test_allocate_multiplies_the_quantity_by_the_size_under_the_same_caps():
    pcfg = PortfolioConfig(max_positions=2, max_exposure=1.2, per_symbol_cap=0.5)
    full = allocate([signal("A", edge=0.02, entry=100.0)], 100_000.0, pcfg)
    assert [(a.signal.symbol, a.qty) for a in full] == [("A", 500.0)]  # 50_000 / 100
    sized = replace(signal("A", edge=0.02, entry=100.0), size=0.4)
    assert [a.qty for a in allocate([sized], 100_000.0, pcfg)] == [200.0]  # 0.4 x 500
    # the notional cap binds first (25_000 -> 250 shares), then the size: 0.4 x 250 = 100
    capped = allocate([sized], 100_000.0, pcfg, cap=RiskLimits(max_notional_per_order=25_000.0).entry_cap)
    assert [a.qty for a in capped] == [100.0]
    # a smaller first order leaves the exposure to the next one: B gets min(50_000, (120_000 - 20_000) / 1)
    both = allocate([sized, signal("B", edge=0.01, entry=30.0)], 100_000.0, pcfg)
    assert [(a.signal.symbol, a.qty) for a in both] == [("A", 200.0), ("B", 1666.0)]
    assert Signal("X", "t", "s", Decision(1), 1.0).size == 1.0  # fixed sizing: the whole quantity


@pytest.mark.parametrize("policy", ["kelly", "cvar"])
def test_the_planner_sizes_and_picks_as_the_sized_backtest(policy):
    """Forty days planned bar by bar from a carried backtest (as a replay does) against one backtest over the
    same days: the same pick, decision and size at every bar (sized to 0 too), and a size that is not always 1."""
    bars = load_symbol("SP500")
    forecaster = load_forecaster("baseline")
    config = replace(PLANNER_CONFIG, sizing=policy, risk_per_trade=0.003, exit="close")  # both sides the one rule
    planner = BacktestPlanner(forecaster, config)
    index = bars.frame.index
    start, days = int(index.searchsorted(pd.Timestamp("2017-03-01", tz="UTC"))), 40
    costs = Costs.for_asset("stock", periods_per_year=bars.periods_per_year)
    learn_from = index[start].isoformat()
    signals = [planner.plan(bars.head(start + d + 1), costs, learn_from) for d in range(days)]

    first = start - PLANNER_CONFIG.windows
    result = run_backtest(bars.head(start + days + 1), forecaster,
                          replace(config, windows=start + days - first, include_latest=False))
    trades = result.trades().set_index(["strategy", "decision_time"])
    picked = dict(zip((t.isoformat() for t in result.decision_times), result.walk_forward["picked"]))
    sizes = []
    for s in signals:
        assert s.strategy == (picked[s.decision_ts] or "none"), s.decision_ts
        if s.strategy == "none":
            continue
        row = trades.loc[(s.strategy, s.decision_ts)]
        size = float(row["size"])
        assert s.metrics["size"] == size  # bit for bit: one window's size equals the engine's
        if row.side != FLAT and size > 0:
            assert (s.decision.side, s.size) == (row.side, size)
            entry = None if pd.isna(row.entry_limit) else row.entry_limit
            assert s.decision.entry_limit == entry
            sizes.append(size)
        else:  # flat, or sized to nothing: no trade
            assert s.decision.side == FLAT and s.size == 1.0
    # measured: 25 (kelly) and 18 (cvar) of the 40 days trade: a limit entry's size comes from the paths that fill
    # it, and every size from the skill each strategy has measured since the carried backtest's start (often 0)
    assert len(sizes) >= 15 and min(sizes) < 1.0 and max(sizes) <= 1.0


def test_the_planner_refuses_calibration_in_one_line():
    with pytest.raises(ConfigError) as err:
        BacktestPlanner(load_forecaster("baseline"), replace(PLANNER_CONFIG, calibrate="conformal",
                                                             calibration_min_windows=50))
    assert "does not recalibrate" in str(err.value) and "\n" not in str(err.value)


def test_sizing_settings_reach_the_planners_config(tmp_path):
    path = tmp_path / "marketcast.toml"
    path.write_text('[trade.sizing]\npolicy = "cvar"\nrisk_per_trade = 0.005\n')
    s = resolve(SETTINGS, SECTION, config=path, env={})
    got = cfg.sizing(s, PLANNER_CONFIG)
    assert (got.sizing, got.kelly_cap, got.risk_per_trade, got.kelly_fraction) == ("cvar", 1.0, 0.005, 0.25)
    assert cfg.sizing(resolve(SETTINGS, SECTION, env={}), PLANNER_CONFIG) == PLANNER_CONFIG  # fixed by default
    env = resolve(SETTINGS, SECTION, env={"MARKETCAST_TRADE_SIZING_POLICY": "kelly",
                                          "MARKETCAST_TRADE_SIZING_KELLY_CAP": "0.5",
                                          "MARKETCAST_TRADE_SIZING_KELLY_FRACTION": "0.1"})
    assert (env["sizing.policy"], env["sizing.kelly_cap"], env["sizing.kelly_fraction"]) == ("kelly", 0.5, 0.1)
    got = cfg.sizing(env, PLANNER_CONFIG)
    assert (got.sizing, got.kelly_cap, got.kelly_fraction) == ("kelly", 0.5, 0.1)
    for bad in ('policy = "martingale"', "kelly_cap = 0", "kelly_cap = 1.5", "risk_per_trade = 0",
                "kelly_fraction = 0", "kelly_fraction = 1.5"):
        path.write_text(f"[trade.sizing]\n{bad}\n")
        with pytest.raises(ConfigError) as err:
            resolve(SETTINGS, SECTION, config=path, env={})
        assert "\n" not in str(err.value)


def test_a_sized_replay_reproduces_the_sized_backtest(tmp_path):
    """A quarter replayed with cvar sizing: every order is the sized backtest's decision, its size is in the
    cycle's record, its fill settles as the backtest's (net = size x unit net), and its quantity is that size
    of what the portfolio allows (per-symbol cap 0.5 of the cycle's equity)."""
    import json

    from marketcast.backtest.fills import settle
    from marketcast.backtest.orders import Bar
    from marketcast.trade.venues.paper import PaperBroker
    from marketcast.trade.journal.state import Journal
    from marketcast.trade.loop.cycle import LoopConfig
    from marketcast.trade.risk.gates import GateConfig
    from marketcast.trade.replay import replay

    syms = ("SP500", "NASDAQ")
    bars = {s: load_symbol(s) for s in syms}
    forecaster = load_forecaster("baseline")
    config = replace(PLANNER_CONFIG, sizing="cvar", risk_per_trade=0.003, exit="close")  # the rule settle() scores
    replay(bars, BacktestPlanner(forecaster, config), tmp_path, "2017-01-01", "2017-04-01",
           LoopConfig(syms, gates=GateConfig(min_edge=-1.0, min_sharpe=-1e9, max_drawdown=1.01), exit="close"))
    journal = Journal(tmp_path / "journal.db")
    broker = PaperBroker(tmp_path / "broker.db", bars, hold=True)
    intents = [i for i in journal.intents() if i.status == "submitted" and i.kind == "entry"]  # not their cls exits
    records = {(r["decision_ts"]): r for r in map(json.loads, (tmp_path / "records.jsonl").read_text().splitlines())}
    backtest = {}
    for sym in syms:
        frame = bars[sym].frame
        first = int(frame.index.searchsorted(pd.Timestamp(journal.first_cycle()))) - PLANNER_CONFIG.windows
        last = frame.index.get_loc(pd.Timestamp(max(i.decision_ts for i in intents if i.symbol == sym)))
        run = run_backtest(bars[sym].head(last + 2), forecaster,  # exit close: the paper broker settles at the close
                           replace(config, windows=last - first + 1, include_latest=False, exit="close"))
        backtest[sym] = run.trades().set_index(["strategy", "decision_time"])
    sizes, fills = [], {f.client_order_id: f for f in broker.fills() if f.kind == "entry"}
    for i in intents:
        d = json.loads(i.decision)
        row = backtest[i.symbol].loc[(i.strategy, i.decision_ts)]
        assert d["side"] == row.side and (d["entry_limit"] is None) == pd.isna(row.entry_limit)
        record = records[i.decision_ts]
        size = record["chosen"][i.symbol]["size"]
        assert size == row["size"] and 0 < size <= 1
        skill = record["chosen"][i.symbol]["skill"]  # what the size rests on, kept with the cycle
        assert skill["trades"] >= 20 and skill["factor"] > 0 and skill["slope"] >= skill["factor"]
        sizes.append(size)
        frame = bars[i.symbol].frame
        nxt = frame.iloc[frame.index.get_loc(pd.Timestamp(i.decision_ts)) + 1]
        costs = Costs.for_asset("stock", periods_per_year=bars[i.symbol].periods_per_year)
        s = settle(Decision(d["side"], d["entry_limit"], d["take_profit"]), Bar(nxt.open, nxt.high, nxt.low, nxt.close),
                   costs, size=size)
        assert s.filled == bool(row.filled) and (not s.filled or s.net_return == pytest.approx(row.net_return,
                                                                                               abs=1e-15))
        price = i.limit_price if i.limit_price is not None else float(frame.at[pd.Timestamp(i.decision_ts), "close"])
        assert i.qty * price <= size * 0.5 * record["equity"] + price  # the size of the per-symbol cap, rounded
    # measured: 25 orders (the sizes start at 0 until a strategy has measured skill; 40 or more at face value)
    assert len(sizes) >= 20 and min(sizes) < 0.5, (len(sizes), min(sizes))
    assert any(f in fills for f in (i.client_order_id for i in intents))
