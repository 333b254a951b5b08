"""Each market on its own clock: crypto decides at every crypto bar close, weekends included; stocks on NYSE
sessions; a cycle of one clock never decides or housekeeps another market's symbols; an old journal keyed by
bar alone is migrated."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from marketcast.data import load_symbol
from marketcast.data.bars import Bars
from marketcast.forecast import load_forecaster
from marketcast.trade.journal.state import Journal
from marketcast.trade.launch import PaperVenue, file_clock
from marketcast.trade.loop.cycle import LoopConfig, TradingLoop
from marketcast.trade.risk.gates import GateConfig
from marketcast.trade.loop.planner import BacktestPlanner
from marketcast.trade.loop.supervisor import Supervisor
from marketcast.trade.ops.alerts import Alerts, AlertThresholds
from marketcast.trade.ops.monitor import Monitor, read_records
from marketcast.trade.replay import replay

from .test_journal_guard import FIRST_JOURNAL

OPEN_GATES = GateConfig(min_edge=-1.0, min_sharpe=-1e9, max_drawdown=1.01)


def crypto_bars(symbol: str, start: str, end: str, seed: int = 7) -> Bars:
    """A daily 24/7 series (every calendar day, UTC midnight), a seeded random walk around 300."""
    index = pd.date_range(start, end, freq="D", tz="UTC", name="timestamp")
    rng = np.random.default_rng(seed)
    close = 300.0 * np.exp(np.cumsum(rng.normal(0.0, 0.03, len(index))))
    open_ = np.r_[300.0, close[:-1]]
    wick = np.abs(rng.normal(0.0, 0.01, len(index)))
    frame = pd.DataFrame({"open": open_, "high": np.maximum(open_, close) * (1 + wick),
                          "low": np.minimum(open_, close) * (1 - wick), "close": close,
                          "volume": np.full(len(index), 5e4)}, index=index)
    return Bars(symbol, frame, "crypto", "test")


def test_a_crypto_and_stock_replay_decides_each_on_its_own_bars(tmp_path):
    bars = {"SP500": load_symbol("SP500"), "ETHUSD": crypto_bars("ETHUSD", "2014-01-01", "2015-04-30")}
    # ETHUSD pinned to maxdiff (as in MIXED_CONFIG below) so the blotter audit below sees crypto limit buys: with
    # MaxDiff's ATR-scaled grid (the default) the walk-forward pick on these bars is buy_hold or simple, market
    # orders only (with the fixed +-1 % grid it happened to pick maxdiff 3 times).
    # SP500 pinned to MaxDiff too: under the default exit rule (next-open) its walk-forward pick sends market
    # entries only, and the audit below checks stock limits on the penny grid
    planner = BacktestPlanner(load_forecaster("baseline"), pinned={"ETHUSD": "maxdiff", "SP500": "maxdiff"})
    state = tmp_path / "st"  # the blotter's CSV goes beside it: an output inside the state folder is refused
    result = replay(bars, planner, state, "2015-03-01", "2015-04-15",
                    LoopConfig(("SP500", "ETHUSD"), gates=OPEN_GATES))
    journal = Journal(state / "journal.db")
    cycles = journal.conn.execute("SELECT clock, decision_ts FROM cycles WHERE status='done'").fetchall()
    by_clock: dict[str, list[pd.Timestamp]] = {}
    for clock, ts in cycles:
        by_clock.setdefault(clock, []).append(pd.Timestamp(ts))
    crypto, stock = by_clock["crypto"], by_clock["stock"]
    assert set(by_clock) == {"crypto", "stock"}
    # every calendar day from 2015-03-01 to 2015-04-14 is a crypto bar: 45 cycles, 13 of them on weekends (Sunday 1 March first)
    assert len(crypto) == 45 and sum(t.dayofweek >= 5 for t in crypto) == 13
    sessions = bars["SP500"].frame.loc["2015-03-01":"2015-04-14"].index
    assert sorted(stock) == list(sessions) and all(t.dayofweek < 5 for t in stock)  # 31 sessions, Good Friday off
    intents = journal.intents()
    sent = [i for i in intents if i.status == "submitted"]
    assert {i.symbol for i in sent} == {"SP500", "ETHUSD"}
    assert any(pd.Timestamp(i.decision_ts).dayofweek >= 5 for i in sent if i.symbol == "ETHUSD")
    for i in intents:  # a symbol's orders come only from its own bars
        assert pd.Timestamp(i.decision_ts) in bars[i.symbol].frame.index, i
    assert all(round(i.limit_price, 2) == i.limit_price for i in sent if i.symbol == "SP500" and i.limit_price)
    records = read_records(state)
    assert {r["clock"] for r in records} == {"crypto", "stock"} and len(records) == len(cycles)
    assert all(set(r["strategies"]) == ({"ETHUSD"} if r["clock"] == "crypto" else {"SP500"}) for r in records)
    assert result.refusals == 0 and records[-1]["broker_refusals"] == 0
    out = cli(["orders", "--state-dir", str(state), "--csv", str(tmp_path / "orders.csv")], tmp_path)
    assert out.returncode == 0, out.stderr
    # SP500's MaxDiff sends limit entries: their prices are checked for whole cents.
    audit_blotter(pd.read_csv(tmp_path / "orders.csv"), weekends=True, stock_limits=True)


def audit_blotter(orders: pd.DataFrame, weekends: bool, stock_limits: bool) -> None:
    """What anyone can check from ``trade orders --csv``: no two opposite-side orders of a symbol from one
    decision bar (an entry's attached take-profit is its own row's column, not a second order; its cls exit goes
    out after the entry filled), no crypto buy
    beyond the non-marginable buying power its check saw, stock limit prices in whole cents from $1 (the paper
    broker and the fake refuse a wash trade themselves: their refusal counts are asserted beside this), crypto
    decided on weekends too."""
    sent = orders[orders["submitted_at"].notna()]
    assert len(sent) > 0
    # a market-on-close exit (kind on_close) is journalled under its entry's bar but sent while the next bar trades,
    # once the entry filled: never beside it
    exits = sent[sent["kind"] == "on_close"]
    entries = sent[sent["kind"] == "entry"].set_index(["symbol", "decision_ts"])
    for _, e in exits.iterrows():
        filled = entries.loc[(e["symbol"], e["decision_ts"]), "filled_at"]
        assert pd.Timestamp(e["submitted_at"]) >= pd.Timestamp(filled)
    sides = sent[sent["kind"] != "on_close"].groupby(["symbol", "decision_ts"])["side"].nunique()
    assert (sides == 1).all(), sides[sides > 1]
    crypto_buys = sent[(sent["asset_class"] == "crypto") & (sent["side"] == "buy") & sent["limit_price"].notna()]
    assert len(crypto_buys) > 0
    assert (crypto_buys["qty"] * crypto_buys["limit_price"] <= crypto_buys["buying_power_seen"] + 1e-6).all()
    stock = sent[(sent["asset_class"] == "stock") & sent["limit_price"].notna()]
    assert (len(stock) > 0) == stock_limits and all(round(p, 2) == p for p in stock["limit_price"] if p >= 1.0)
    crypto_days = pd.to_datetime(sent.loc[sent["asset_class"] == "crypto", "decision_ts"], utc=True).dt.dayofweek
    assert not weekends or (crypto_days >= 5).any()
    stock_days = pd.to_datetime(sent.loc[sent["asset_class"] == "stock", "decision_ts"], utc=True).dt.dayofweek
    assert (stock_days < 5).all()


def test_a_look_on_sunday_runs_the_crypto_clock_and_only_watches_the_stocks(tmp_path):
    data, state, clock = tmp_path / "data", tmp_path / "state", tmp_path / "clock"
    data.mkdir()
    load_symbol("SP500").frame.loc[:"2018-07-13"].to_csv(data / "SP500.csv")  # through Friday
    crypto_bars("ETHUSD", "2017-06-01", "2018-07-15").frame.to_csv(data / "ETHUSD.csv")
    clock.write_text("2018-07-13T21:30:00Z")  # Friday after the close: the crypto bar of Friday is still trading
    venue = PaperVenue(("SP500", "ETHUSD"), state, data, None, file_clock(clock))
    loop = TradingLoop(venue.broker, Journal(state / "journal.db"), BacktestPlanner(load_forecaster("baseline")),
                       venue.feed, LoopConfig(("SP500", "ETHUSD"), gates=OPEN_GATES), Monitor(state),
                       venue.asset_classes)
    looks = []

    def wait(seconds: float) -> bool:
        looks.append(seconds)
        clock.write_text("2018-07-15T01:00:00Z")  # Sunday: Saturday's crypto bar is complete, no new session
        return len(looks) == 2

    assert Supervisor(loop, venue, Alerts(state), AlertThresholds(), interval_s=1.0, wait=wait).run() == 0
    done = [tuple(r) for r in loop.journal.conn.execute(
        "SELECT clock, decision_ts FROM cycles WHERE status='done' ORDER BY decision_ts, clock").fetchall()]
    assert done == [("crypto", "2018-07-12T00:00:00+00:00"), ("stock", "2018-07-13T00:00:00+00:00"),
                    ("crypto", "2018-07-14T00:00:00+00:00")]
    assert loop.journal.last_done_cycle("stock") == "2018-07-13T00:00:00+00:00"
    assert loop.journal.last_done_cycle("crypto") == "2018-07-14T00:00:00+00:00"
    records = [json.loads(line) for line in (state / "records.jsonl").read_text().splitlines()]
    assert [(r["clock"], r["decision_ts"][:10], sorted(r["strategies"])) for r in records] == [
        ("stock", "2018-07-13", ["SP500"]), ("crypto", "2018-07-12", ["ETHUSD"]),
        ("crypto", "2018-07-14", ["ETHUSD"])]  # the Sunday look: the crypto clock's cycle, a watch of stocks


def test_a_journal_from_before_clocks_is_migrated_and_its_cycles_count_for_every_clock(tmp_path):
    path = tmp_path / "journal.db"
    with sqlite3.connect(path) as c:  # the first journal's tables: cycles keyed by bar alone
        c.executescript(FIRST_JOURNAL)
        c.execute("INSERT INTO cycles VALUES ('2018-07-12T00:00:00+00:00', 'done', 'x', 'y')")
    journal = Journal(path)
    assert journal.cycle_done("2018-07-12T00:00:00+00:00")
    assert journal.last_done_cycle("crypto") == journal.last_done_cycle("stock") == "2018-07-12T00:00:00+00:00"
    journal.start_cycle("2018-07-14T00:00:00+00:00", "crypto")
    journal.finish_cycle("2018-07-14T00:00:00+00:00", "crypto")
    journal.start_cycle("2018-07-14T00:00:00+00:00", "stock")  # the same stamp on another clock is another cycle
    assert journal.last_done_cycle("crypto") == "2018-07-14T00:00:00+00:00"
    assert journal.last_done_cycle("stock") == "2018-07-12T00:00:00+00:00"
    assert not journal.cycle_done("2018-07-14T00:00:00+00:00", "stock")


def test_an_exit_sent_outside_its_session_says_when_it_can_trade():
    from marketcast.trade.risk.freshness import queued_until

    # Thursday 2 April 2015's bar, decided after its close: Good Friday is a holiday, so Monday's open (EDT)
    assert queued_until("stock", None, "2015-04-02T00:00:00+00:00") == "2015-04-06 13:30 UTC"
    assert queued_until("stock", "2015-04-06T15:00:00Z", "2015-04-06T00:00:00+00:00") is None  # in the session
    assert queued_until("crypto", None, "2015-04-04T00:00:00+00:00") is None  # 24/7
    # forex closes Friday 17:00 New York and opens Sunday 17:00 New York (21:00 UTC in April)
    assert queued_until("forex", "2015-04-04T12:00:00Z", "2015-04-03T00:00:00+00:00") == "2015-04-05 21:00 UTC"


MIXED_CONFIG = """
[trade]
symbols = ["ETHUSD", "SP500"]
model = ["toto", "kronos", "baseline"]   # the first that loads and warms up
[trade.strategy]
ETHUSD = "maxdiff"                       # traded whatever the walk-forward pick
[trade.risk]
max_daily_loss = 0.03                    # halt: cancel the loop's orders, exit 5 until `trade resume`
[trade.alerts]
webhook = "https://hooks.example.com/marketcast"
"""


def cli(args: list[str], cwd) -> subprocess.CompletedProcess:
    src = str(Path(__file__).resolve().parents[2] / "src")
    return subprocess.run([sys.executable, "-m", "marketcast.commands", "trade", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600, env={**os.environ, "PYTHONPATH": src, "COLUMNS": "250"})


GATES_OPEN_TOML = "[trade.gates]\nmin_edge = -1.0\nmin_sharpe = -1e9\nmax_drawdown = 1.01\n"


def test_a_crypto_and_stock_config_replays_2015_with_no_broker_refusal(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    # every gate open, so both clocks send orders all year (under the default next-open exit the default gates
    # let none through in 2015; under close, 2)
    (tmp_path / "marketcast.toml").write_text(MIXED_CONFIG + GATES_OPEN_TOML)
    load_symbol("SP500").frame.loc[:"2015-12-31"].to_csv(data / "SP500.csv")
    crypto_bars("ETHUSD", "2014-01-01", "2015-12-31").frame.to_csv(data / "ETHUSD.csv")
    out = cli(["replay", "--start", "2015-01-01", "--end", "2015-12-31", "--data-dir", "data", "--state-dir", "st"],
              tmp_path)
    assert out.returncode == 0, out.stderr
    line = " ".join(out.stdout.split())
    assert "replay 2015-01-01 .. 2015-12-31 ETHUSD,SP500" in line and "broker refusals 0;" in line
    records = read_records(tmp_path / "st")
    assert {r["clock"] for r in records} == {"crypto", "stock"} and records[-1]["broker_refusals"] == 0
    pinned = {r["chosen"]["ETHUSD"]["pinned"] for r in records if r["clock"] == "crypto"}
    assert pinned == {True} and {r["strategies"]["ETHUSD"] for r in records if r["clock"] == "crypto"} == {"maxdiff"}
    journal = Journal(tmp_path / "st" / "journal.db")
    submitted = journal.conn.execute("SELECT symbol, COUNT(*) FROM intents WHERE status='submitted' GROUP BY symbol")
    assert {s: n for s, n in submitted if n >= 10}.keys() == {"ETHUSD", "SP500"}  # both clocks trade


def test_a_symbol_of_a_market_the_loop_cannot_trade_is_one_line_before_any_order(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    load_symbol("SP500").frame.loc[:"2018-07-13"].to_csv(data / "SP500.csv")
    load_symbol("SP500").frame.loc[:"2018-07-13", ["open", "high", "low", "close"]].div(2000).to_csv(
        data / "EURUSD.csv")
    out = cli(["run", "--symbols", "SP500,EURUSD", "--data-dir", "data", "--state-dir", "st", "--once"], tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == ("error: trade.symbols: EURUSD (forex): the loop trades stock and crypto only; drop "
                                  "it from the symbols (or pass --asset-class where the name misleads)")
    assert not (tmp_path / "st").exists()  # refused before the state folder: no journal, broker, lock or log
