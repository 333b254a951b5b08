"""Fresh data only: the calendar says which bar should exist, hand-checked on NYSE sessions (a weekend, the 4th
of July, an early close), around the clock for crypto and on an intraday grid; in the loop a stale symbol, data
that went back or a quote too old or too wide gets no entry, a WARNING and its reason in the record."""

from __future__ import annotations

import logging

import pandas as pd
import pytest

from marketcast.data import load_symbol
from marketcast.data.bars import Bars
from marketcast.trade.loop.cycle import LoopConfig, TradingLoop
from marketcast.trade.loop.feed import history_feed
from marketcast.trade.risk.freshness import Freshness, complete, latest_complete, quote_reasons, stale_reason, went_back
from marketcast.trade.risk.gates import GateConfig
from marketcast.trade.ops.monitor import Monitor
from marketcast.trade.venues.paper import PaperBroker
from marketcast.trade.journal.state import Journal
from marketcast.trade.types import Quote

from .helpers import maxdiff_planner

T = pd.Timestamp
SP = load_symbol("SP500")


def stock(end: str, hour: int = 0) -> Bars:
    """SP500's daily bars up to ``end``, stamped at ``hour`` UTC (0: midnight as the embedded data, 4: Alpaca's
    midnight in New York during summer time)."""
    frame = SP.frame.loc[:end].copy()
    frame.index = frame.index + pd.Timedelta(hours=hour)
    return Bars("SP500", frame, "stock", "test")


@pytest.mark.parametrize("now, due", [
    ("2018-07-20T19:59Z", "2018-07-19"),  # Friday before the 16:00 New York close (20:00 UTC in summer)
    ("2018-07-20T20:00Z", "2018-07-20"),
    ("2018-07-22T12:00Z", "2018-07-20"),  # Sunday: Friday's bar is the last
    ("2018-07-05T12:00Z", "2018-07-03"),  # the 4th of July is a holiday
    ("2018-07-03T17:00Z", "2018-07-03"),  # ... and the 3rd closed early, at 13:00 New York
    ("2018-07-03T16:59Z", "2018-07-02"),
])
def test_the_daily_bar_due_follows_nyse_sessions(now, due):
    assert latest_complete(stock("2018-07-20"), now) == T(due, tz="UTC")


def test_stale_is_judged_by_session_so_alpacas_stamps_count_as_their_day():
    cfg = Freshness(stale_after_s=3600)
    for hour in (0, 4):
        bars = stock("2018-07-20", hour)
        assert stale_reason(bars, "2018-07-20T20:59Z", cfg) is None  # Friday's bar exists, Thursday's was due
        assert stale_reason(bars, "2018-07-23T20:59Z", cfg) is None  # Monday's is due only from 21:00
        reason = stale_reason(bars, "2018-07-23T21:00Z", cfg)
        assert reason == ("stale data: the last bar is 2018-07-20 %02d:00, but the XNYS calendar says the bar of "
                          "2018-07-23 00:00 was complete by 2018-07-23 20:00 UTC (stale_after_s 3600)" % hour)
    assert stale_reason(stock("2018-07-19"), "2018-07-22T12:00Z", cfg).startswith(
        "stale data: the last bar is 2018-07-19 00:00")  # the weekend does not hide a missing Friday


def test_complete_drops_a_session_still_trading_and_bars_after_the_clock():
    alpaca = stock("2018-07-20", 4)  # Alpaca stamps today's bar at 04:00 UTC and fills it during the session
    assert complete(alpaca, "2018-07-20T15:00Z").frame.index[-1] == T("2018-07-19T04:00Z")
    assert complete(alpaca, "2018-07-20T20:01Z") is alpaca
    assert len(complete(stock("2018-07-20"), "2018-07-12T22:00Z").frame) == len(SP.frame.loc[:"2018-07-12"])


def test_crypto_is_due_every_utc_day_and_intraday_bars_on_their_grid():
    days = pd.date_range("2024-04-01", "2024-04-30", freq="D", tz="UTC")
    crypto = Bars("BTCUSD", pd.DataFrame({"open": 1.0, "high": 1.0, "low": 1.0, "close": 1.0, "volume": 1.0},
                                         index=days), "crypto", "test")
    assert latest_complete(crypto, "2024-05-01T00:30Z") == T("2024-04-30", tz="UTC")  # a Wednesday: no weekends
    assert stale_reason(crypto, "2024-05-02T00:59Z", Freshness()) is None  # May 1st's bar ended at midnight
    assert "the bar of 2024-05-01 00:00 was complete by 2024-05-02 00:00" in stale_reason(
        crypto, "2024-05-02T01:00Z", Freshness())
    hours = pd.date_range("2024-04-29T13:30Z", periods=14, freq="30min")  # 30-minute bars of one NYSE session
    intraday = Bars("SP500", pd.DataFrame({"open": 1.0, "high": 1.0, "low": 1.0, "close": 1.0, "volume": 1.0},
                                          index=hours[:10]), "stock", "test")  # 13:30 .. 18:00
    assert latest_complete(intraday, "2024-04-29T19:15Z") == T("2024-04-29T18:30Z")  # the 18:30 bar ended 19:00
    assert stale_reason(intraday, "2024-04-29T19:14Z", Freshness(stale_after_s=900)) is None
    assert "the bar of 2024-04-29 18:30 was complete by 2024-04-29 19:00" in stale_reason(
        intraday, "2024-04-29T19:15Z", Freshness(stale_after_s=900))


def test_went_back_and_quote_reasons():
    assert went_back("2018-07-19T00:00:00+00:00", "2018-07-20T00:00:00+00:00") == (
        "data moved backwards: the last bar is 2018-07-19 00:00, the loop already saw 2018-07-20 00:00")
    assert went_back("2018-07-20", "2018-07-20T00:00:00+00:00") is None and went_back("2018-07-20", None) is None
    cfg = Freshness(max_quote_age_s=60, max_spread=0.01)
    fresh = Quote("X", 99.6, 100.4, "2024-05-01T19:59:30Z")  # 0.803 % wide, 30 s old
    now = "2024-05-01T20:00:00Z"
    assert quote_reasons(fresh, now, cfg, wanted=True, required=True) == []
    old = Quote("X", 99.0, 101.1, "2024-05-01T19:58:00Z")
    assert quote_reasons(old, now, cfg, True, True) == ["quote is 120 s old (max_quote_age_s 60)",
                                                        "spread 2.121% is wider than max_spread 1.000%"]
    synthetic = Quote("X", 100.0, 100.0, source="synthetic")
    assert quote_reasons(synthetic, now, cfg, True, True) == ["no real quote (require_quote)"]
    assert quote_reasons(synthetic, now, cfg, True, False) == []  # not required: the synthetic quote prices it
    assert quote_reasons(old, now, cfg, False, True) == []  # ADD_LATEST off, or a broker without quotes
    assert quote_reasons(old, None, cfg, True, True) == ["spread 2.121% is wider than max_spread 1.000%"]


def test_the_loop_skips_a_stale_symbol_with_a_warning_and_the_reason_in_its_record(tmp_path, caplog):
    bars = {"SP500": SP, "NASDAQ": load_symbol("NASDAQ")}
    broker = PaperBroker(tmp_path / "broker.db", bars, start="2017-03-01")
    broker.advance_to("2017-03-01")
    open_gates = GateConfig(min_edge=-1.0, min_sharpe=-1e9, max_drawdown=1.01)
    loop = TradingLoop(broker, Journal(tmp_path / "journal.db"),
                       maxdiff_planner(),
                       history_feed(bars, lambda: broker.clock), LoopConfig(("SP500", "NASDAQ"), gates=open_gates),
                       Monitor(tmp_path))
    caplog.set_level(logging.WARNING, "marketcast.trade")
    fresh = loop.run_cycle(broker.clock, dry_run=True, now=T("2017-03-01T22:00Z"))
    assert len(fresh.planned) == 2 and fresh.skipped == {}
    report = loop.run_cycle(broker.clock, now=T("2017-03-06T22:00Z"))  # Monday evening: Thursday and Friday missing
    assert report.submitted == [] and report.planned == []
    why = ("stale data: the last bar is 2017-03-01 00:00, but the XNYS calendar says the bar of 2017-03-06 00:00 was "
           "complete by 2017-03-06 21:00 UTC (stale_after_s 3600)")
    assert report.record["skipped"] == {"SP500": [why], "NASDAQ": [why]}
    assert f"SP500: no new entry: {why}" in caplog.messages
    loop.seen["SP500"] = "2017-03-02T00:00:00+00:00"  # the loop had seen a later bar: the data went back
    back = loop.run_cycle(broker.clock, dry_run=True, now=T("2017-03-01T22:00Z"))
    assert back.skipped == {"SP500": ("data moved backwards: the last bar is 2017-03-01 00:00, the loop already saw "
                                      "2017-03-02 00:00",)} and [i.symbol for i in back.planned] == ["NASDAQ"]
