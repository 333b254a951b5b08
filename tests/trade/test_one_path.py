"""One path for ``trade run`` and ``trade replay`` (trade/risk/markets.py): a futures or forex symbol is refused by
both in one line, exit 2, before any file; a stock row on a day that is no NYSE session is never decided on or
filled on, in a replay as in the paper loop, which plans on the session before; a symbol without bars in the
replay's range is one warning line; an output path inside the state folder is refused."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from marketcast.data import load_symbol
from marketcast.trade.journal.state import Journal
from marketcast.trade.launch import PaperVenue, file_clock
from marketcast.trade.loop.cycle import LoopConfig
from marketcast.trade.replay import replay

from .helpers import maxdiff_planner, trade_main
from .test_replay import OPEN_GATES

HOLIDAY, SATURDAY = "2012-07-04", "2012-07-07"  # Independence Day (NYSE closed), and a weekend day


def with_rows_off_sessions(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with a copy of the bar before each of :data:`HOLIDAY` and :data:`SATURDAY` stamped on that day:
    the rows a careless export adds."""
    extra = []
    for day, source in ((HOLIDAY, "2012-07-03"), (SATURDAY, "2012-07-06")):
        row = frame.loc[[source]].copy()
        row.index = pd.DatetimeIndex([pd.Timestamp(day, tz="UTC")], name=frame.index.name)
        extra.append(row)
    return pd.concat([frame, *extra]).sort_index()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bars")
    sp500 = load_symbol("SP500").frame.loc["2010-01-01":"2012-12-31"]
    sp500.to_csv(folder / "SP500.csv")
    with_rows_off_sessions(sp500).to_csv(folder / "HOLI.csv")
    sp500.to_csv(folder / "ES=F.csv")  # futures by yfinance's =F suffix
    (sp500[["open", "high", "low", "close"]] / 1600).to_csv(folder / "EURUSD=X.csv")  # forex by =X
    sp500.loc[:"2011-06-30"].to_csv(folder / "OLD.csv")  # ends a year before the replay
    return folder


@pytest.mark.parametrize("symbol, cls", [("ES=F", "future"), ("EURUSD=X", "forex")])
@pytest.mark.parametrize("command", ["replay", "run"])
def test_a_futures_or_forex_symbol_is_one_line_exit_2_and_no_file_in_run_and_replay(data, tmp_path, capsys,
                                                                                    symbol, cls, command):
    state = tmp_path / "st"
    extra = (["--start", "2012-06-01", "--end", "2012-07-31"] if command == "replay"
             else ["--once", "--clock-file", str(tmp_path / "clock")])
    (tmp_path / "clock").write_text("2012-07-31T21:00:00Z")
    code = trade_main([command, "--symbols", f"SP500,{symbol}", "--data-dir", str(data), "--state-dir", str(state),
                       *extra])
    out = capsys.readouterr()
    assert code == 2 and out.out == ""
    assert out.err.strip() == (f"error: trade.symbols: {symbol} ({cls}): the loop trades stock and crypto only; drop "
                               f"it from the symbols (or pass --asset-class where the name misleads)")
    assert not state.exists()  # no journal.db, broker.db, loop.lock or trade.log


def cycles(state) -> list[str]:
    journal = Journal(state / "journal.db")
    bars = [r[0][:10] for r in journal.conn.execute("SELECT decision_ts FROM cycles ORDER BY decision_ts")]
    journal.close()
    return bars


def test_a_replay_makes_no_decision_on_a_stock_row_off_the_sessions(data, tmp_path, capsys):
    state = tmp_path / "st"
    assert trade_main(["replay", "--symbols", "HOLI", "--data-dir", str(data), "--state-dir", str(state),
                       "--start", "2012-06-25", "--end", "2012-07-13"]) == 0
    err = capsys.readouterr().err
    weekend, warning = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert "daily bars falls on a weekend (the first on 2012-07-07)" in weekend  # the loader's count, at load
    assert warning.endswith("HOLI: 2 row(s) on days that are no XNYS session (first 2012-07-04) are not traded on; "
                            "the loop plans on the session before, as it does live")
    assert cycles(state) == ["2012-06-25", "2012-06-26", "2012-06-27", "2012-06-28", "2012-06-29", "2012-07-02",
                             "2012-07-03", "2012-07-05", "2012-07-06", "2012-07-09", "2012-07-10", "2012-07-11",
                             "2012-07-12"]  # NYSE's sessions: neither the 4th nor the 7th


def test_rows_off_the_sessions_change_no_order_of_a_replay(data, tmp_path):
    """The same orders, fills and equity as the file without those rows: nothing was decided or filled on them."""
    got = {}
    for name in ("SP500", "HOLI"):
        bars = {"SP500": replace(load_symbol(name, data), symbol="SP500")}  # ids are keyed on the symbol
        state = tmp_path / name
        result = replay(bars, maxdiff_planner(), state, "2012-06-01", "2012-07-31",
                        LoopConfig(("SP500",), gates=OPEN_GATES))
        journal = Journal(state / "journal.db")
        got[name] = ([tuple(i) for i in journal.conn.execute(
            "SELECT client_order_id, decision_ts, side, qty, limit_price, status FROM intents ORDER BY 1")],
            [(f.client_order_id, f.qty, f.price, f.timestamp) for f in journal.fills()], result.equity.tolist())
        journal.close()
    assert len(got["SP500"][0]) >= 5 and len(got["SP500"][1]) >= 2  # orders were placed and filled
    assert got["HOLI"] == got["SP500"]
    assert not any(ts.startswith((HOLIDAY, SATURDAY)) for _, _, _, ts in got["HOLI"][1])


def test_the_paper_loop_plans_on_the_session_before_a_holiday_row(data, tmp_path):
    """``trade run``'s paper venue reads its bars through the same filter: on the evening of the 4th the
    newest bar is the 3rd's, as Alpaca would serve it."""
    clock = tmp_path / "clock"
    clock.write_text(f"{HOLIDAY}T21:00:00Z")
    venue = PaperVenue(("HOLI",), tmp_path / "st", data, None, file_clock(clock))
    assert venue.refresh(venue.now()) == "2012-07-03T00:00:00+00:00"
    clock.write_text(f"{SATURDAY}T21:00:00Z")
    venue.refresh(venue.now())
    index = venue.feed("HOLI").frame.index
    assert index[-1] == pd.Timestamp("2012-07-06", tz="UTC") and pd.Timestamp(HOLIDAY, tz="UTC") not in index
    venue.broker.close()


def test_a_symbol_without_bars_in_the_range_is_one_warning_line(data, tmp_path, capsys):
    state = tmp_path / "st"
    assert trade_main(["replay", "--symbols", "SP500,OLD", "--data-dir", str(data), "--state-dir", str(state),
                       "--start", "2012-06-25", "--end", "2012-07-13"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and warnings[0].endswith(
        "OLD: no bars between 2012-06-25 and 2012-07-13 (its bars run 2010-01-04 .. 2011-06-30); it is not traded "
        "in this replay")
    journal = Journal(state / "journal.db")
    assert {r[0] for r in journal.conn.execute("SELECT symbol FROM intents")} <= {"SP500"}
    journal.close()


def test_an_output_inside_the_state_folder_is_refused_before_any_write(data, tmp_path, capsys):
    state = tmp_path / "st"
    assert trade_main(["replay", "--symbols", "SP500", "--data-dir", str(data), "--state-dir", str(state),
                       "--start", "2012-06-25", "--end", "2012-07-13", "--png", str(state / "sub" / "e.png")]) == 2
    assert capsys.readouterr().err.strip() == (f"error: --png {state / 'sub' / 'e.png'} lies inside the state folder "
                                               f"{state}, which holds the journal and the broker's books; write it "
                                               f"elsewhere, e.g. --png e.png")
    assert not state.exists()
    assert trade_main(["replay", "--symbols", "SP500", "--data-dir", str(data), "--state-dir", str(state),
                       "--start", "2012-06-25", "--end", "2012-07-13"]) == 0
    before = {p.name: p.read_bytes() for p in state.iterdir()}
    capsys.readouterr()
    for target in (state / "journal.db", state / "broker.db", state / "orders.csv", state):
        assert trade_main(["orders", "--state-dir", str(state), "--csv", str(target)]) == 2, target
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"error: --csv {target} lies inside the state folder") and "\n" not in err
        assert {p.name: p.read_bytes() for p in state.iterdir()} == before  # the journal intact, nothing added


def test_the_loops_warnings_are_warning_lines_on_stderr_and_log_lines_in_trade_log(tmp_path, capsys):
    import logging
    import re

    from marketcast.trade.launch import setup_logging

    setup_logging(tmp_path, verbose=False)
    try:
        logging.getLogger("marketcast.trade.loop").warning("SP500: quote too old (%d s)", 90)
        logging.getLogger("marketcast.trade.loop").info("cycle done")  # not on stderr without --verbose
    finally:
        setup_logging(None, verbose=False)
    assert capsys.readouterr().err.splitlines() == ["warning: SP500: quote too old (90 s)"]
    [line] = (tmp_path / "trade.log").read_text().splitlines()[-2:-1]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ WARNING marketcast.trade.loop: SP500: quote too old "
                        r"\(90 s\)", line)
