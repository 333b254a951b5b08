"""``trade orders``: a replay's journal audited through the blotter, against the journal's own fills, the
paper broker's books and cash figures computed by hand; bad input is one line and leaves no file."""

from __future__ import annotations

import csv
import json
import re
import sqlite3
import stat
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from marketcast.commands import main
from marketcast.data import load_symbol
from marketcast.data.bars import Bars
from marketcast.forecast import load_forecaster
from marketcast.trade.venues.paper import PaperBroker
from marketcast.trade.journal.state import Journal
from marketcast.trade.loop.cycle import LoopConfig, TradingLoop
from marketcast.trade.loop.feed import history_feed
from marketcast.trade.risk.gates import GateConfig
from marketcast.trade.loop.planner import PLANNER_CONFIG, BacktestPlanner
from marketcast.trade.ops.blotter import COLUMNS, rows
from marketcast.trade.replay import replay

from .helpers import maxdiff_planner

DOCS = Path(__file__).resolve().parents[2] / "docs" / "trading.md"
SYMS = ("SP500", "NASDAQ")
OPEN_GATES = GateConfig(min_edge=-1.0, min_sharpe=-1e9, max_drawdown=1.01)  # every non-flat signal trades
CASH = 50_000.0


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """January 2017 of SP500 and NASDAQ with the baseline model: about 20 orders, most of them filled."""
    state = tmp_path_factory.mktemp("replay")
    bars = {s: load_symbol(s) for s in SYMS}
    replay(bars, BacktestPlanner(load_forecaster("baseline"), replace(PLANNER_CONFIG, exit="close")), state,
           "2017-01-01", "2017-02-01", LoopConfig(SYMS, gates=OPEN_GATES, exit="close"), starting_cash=CASH)
    return state, bars


def cash_flow(fill) -> float:
    return (fill.qty * fill.price if fill.side == "sell" else -fill.qty * fill.price) - fill.fee


def test_a_replays_blotter_has_every_submitted_order_with_its_fills_and_the_cash_it_saw(replayed):
    state, bars = replayed
    journal = Journal(state / "journal.db")
    got = rows(journal)
    posted = journal.submission_counts()
    fills = journal.fills()
    broker = PaperBroker(state / "broker.db", bars, hold=True)
    assert len(got) == len(journal.intents()) >= 15 and all(list(r) == list(COLUMNS) for r in got)
    assert {r["client_order_id"] for r in got if r["submitted_at"]} == set(posted)  # every POST is a row
    assert sum(r["filled_qty"] > 0 for r in got) >= 5
    for r in got:
        cid, decided = r["client_order_id"], pd.Timestamp(r["decision_ts"])
        assert pd.Timestamp(r["submitted_at"]) >= decided, r  # sent after its bar closed, never before
        assert (r["asset_class"], r["stop_price"], r["status"]) == ("stock", None, "submitted")
        exits = [f for f in fills if f.client_order_id == cid and f.kind != r["kind"]]
        order = broker.order_by_client_id(cid)  # the broker's own books agree
        assert (order.status, order.filled_qty, order.filled_avg_price) == (
            r["broker_status"], r["filled_qty"], r["avg_fill_price"])
        own = [f for f in fills if f.client_order_id == cid and f.kind == r["kind"]]
        assert r["filled_qty"] == sum(f.qty for f in own)
        if own:
            assert r["avg_fill_price"] == pytest.approx(sum(f.qty * f.price for f in own) / r["filled_qty"])
            assert r["filled_at"] == max(f.timestamp for f in own) and pd.Timestamp(r["filled_at"]) > decided
        if r["kind"] == "entry" and own:  # each round-trips its bar: its take-profit leg, or its cls exit
            cls = [f for f in fills if f.kind == "on_close" and f.symbol == r["symbol"] and pd.Timestamp(
                f.timestamp) == pd.Timestamp(r["filled_at"])]
            assert r["exit_filled_qty"] + sum(f.qty for f in cls) == r["filled_qty"]
            assert r["exit_filled_qty"] == sum(f.qty for f in exits)
        if r["kind"] == "on_close":  # sent while the entry's bar traded: the entry's fill is in the cash it saw
            opened = [f for f in fills if f.kind in ("entry", "take_profit") and pd.Timestamp(f.timestamp) ==
                      pd.Timestamp(r["submitted_at"])]
            by_hand = CASH + sum(cash_flow(f) for f in fills if pd.Timestamp(f.timestamp) <= decided) + sum(
                cash_flow(f) for f in opened)
            assert r["cash_seen"] == pytest.approx(by_hand, rel=1e-12)
            continue
        # seen at the check: the starting cash plus every fill settled by the decision bar (each position left at
        # its bar's close, so nothing is open between bars and the buying power is the cash)
        by_hand = CASH + sum(cash_flow(f) for f in fills if pd.Timestamp(f.timestamp) <= decided)
        assert r["cash_seen"] == pytest.approx(by_hand, rel=1e-12) and r["buying_power_seen"] == r["cash_seen"]
    assert got[0]["cash_seen"] == CASH  # the first bar's orders saw the untouched account
    broker.close()
    journal.close()


def documented_columns() -> list[str]:
    section = DOCS.read_text().split("## Order blotter: `trade orders`")[1].split("\n## ")[0]
    return re.findall(r"^\| `(\w+)` \|", section, flags=re.M)


def test_the_cli_writes_exactly_the_documented_columns_as_csv_and_json(replayed, tmp_path, capsys):
    state, _ = replayed
    journal = Journal(state / "journal.db")
    want = rows(journal)
    journal.close()
    out = tmp_path / "audit" / "orders.csv"
    assert main(["trade", "orders", "--state-dir", str(state), "--csv", str(out)]) == 0
    assert f"{len(want)} orders" in capsys.readouterr().out
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    with open(out, newline="") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == documented_columns() == list(COLUMNS)
        written = list(reader)
    assert written == [{k: "" if v is None else str(v) for k, v in r.items()} for r in want]
    assert main(["trade", "orders", "--state-dir", str(state), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == want
    assert main(["trade", "orders", "--state-dir", str(state)]) == 0
    filled = sum(r["filled_qty"] > 0 for r in want)
    assert f"({len(want)} orders, {filled} filled)" in capsys.readouterr().out  # the table (its columns fit)


def test_every_time_column_of_a_replays_csv_is_on_the_simulated_clock(replayed, tmp_path, capsys):
    """One clock per blotter: a January 2017 replay's entries were sent on their decision bar and filled on a later
    bar of January 2017, their cls exits sent while that bar traded and filled at its close; the wall clock (when
    the replay ran, after the data ends) has its own column."""
    state, bars = replayed
    out = tmp_path / "orders.csv"
    assert main(["trade", "orders", "--state-dir", str(state), "--csv", str(out)]) == 0
    capsys.readouterr()
    with open(out, newline="") as fh:
        sent = [r for r in csv.DictReader(fh) if r["submitted_at"]]
    assert len(sent) >= 15
    last_bar = max(b.frame.index[-1] for b in bars.values())
    index = bars["SP500"].frame.index
    for r in sent:
        submitted, decided = pd.Timestamp(r["submitted_at"]), pd.Timestamp(r["decision_ts"])
        if r["kind"] == "on_close":  # a cls exit goes out while the entry's bar trades and fills at its close
            assert submitted == index[index.get_loc(decided) + 1], r
            assert pd.Timestamp(r["filled_at"]) == submitted, r
            continue
        assert submitted == decided, r  # the bar the paper broker stood on
        assert pd.Timestamp("2017-01-01", tz="UTC") <= submitted < pd.Timestamp("2017-02-02", tz="UTC"), r
        for column in ("filled_at", "exit_filled_at"):
            if r[column]:
                assert pd.Timestamp(r[column]) > submitted, (column, r)  # no fill before its submission
        assert pd.Timestamp(r["wall_clock_at"]) > last_bar, r  # the replay ran after the data's last bar
    assert sum(bool(r["filled_at"]) for r in sent) >= 5


class MarginPaper(PaperBroker):
    """A margin account as Alpaca reports one: stocks may draw twice the cash, crypto the cash alone."""

    def account(self):
        a = super().account()
        return replace(a, buying_power=2 * a.buying_power, non_marginable_buying_power=a.buying_power)


def test_a_crypto_order_records_the_non_marginable_buying_power_it_was_checked_against(tmp_path):
    sp500 = load_symbol("SP500")
    coin = Bars("BTCUSD", load_symbol("NASDAQ").frame, "crypto", "test")  # fractional, long only
    bars = {"SP500": sp500, "BTCUSD": coin}
    broker = MarginPaper(tmp_path / "broker.db", bars, starting_cash=10_000.0, start="2017-03-01")
    broker.advance_to("2017-03-01")
    journal = Journal(tmp_path / "journal.db")
    loop = TradingLoop(broker, journal, maxdiff_planner(),
                       history_feed(bars, lambda: broker.clock), LoopConfig(("SP500", "BTCUSD"), gates=OPEN_GATES))
    loop.run_cycle(broker.clock)
    seen = {r["symbol"]: (r["asset_class"], r["cash_seen"], r["buying_power_seen"]) for r in rows(journal)}
    assert seen == {"SP500": ("stock", 10_000.0, 20_000.0), "BTCUSD": ("crypto", 10_000.0, 10_000.0)}
    journal.close()
    broker.close()


def test_a_take_profit_and_a_close_record_the_account_their_reconcile_read(fake, tmp_path):
    from marketcast.trade.test_kit.alpaca_env import D1, D2, adapter, alpaca_loop, order, submitted

    loop = alpaca_loop(fake, tmp_path, symbols=("BTCUSD",), classes={"BTCUSD": "crypto"})
    submitted(loop, order("mc-btc", symbol="BTCUSD", qty=0.25, limit_price=59_000.0, take_profit=61_000.0,
                          time_in_force="gtc"), D1)
    fake.fill("mc-btc", 0.25, 59_000.0, at="2024-04-29T10:00:00Z")
    before_take_profit = adapter(fake).account()  # what the next reconcile reads: nothing moves in between
    loop.reconcile(D1)  # Alpaca cannot attach a crypto take-profit: sent on its own
    before_close = adapter(fake).account()
    loop.reconcile(D2)  # the next bar: the take-profit is cancelled, the leftover closed at market
    by_kind = {r["kind"]: r for r in rows(loop.journal)}
    assert set(by_kind) == {"entry", "take_profit", "close"}
    for kind, account in (("take_profit", before_take_profit), ("close", before_close)):
        r = by_kind[kind]
        assert r["submitted_at"] and r["asset_class"] == "crypto", r
        assert (r["cash_seen"], r["buying_power_seen"]) == (account.cash, account.buying_power_for(True)), kind
    assert before_close.cash == pytest.approx(before_take_profit.cash)  # the fill was paid before either
    assert by_kind["entry"]["filled_qty"] == 0.25 and by_kind["entry"]["avg_fill_price"] == 59_000.0


OLD_INTENTS = """CREATE TABLE intents (
    client_order_id TEXT PRIMARY KEY, decision_ts TEXT NOT NULL, strategy TEXT NOT NULL,
    symbol TEXT NOT NULL, side TEXT NOT NULL, qty REAL NOT NULL, type TEXT NOT NULL,
    limit_price REAL, take_profit REAL, time_in_force TEXT NOT NULL, status TEXT NOT NULL,
    broker_order_id TEXT, error TEXT, attempts INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL, decision TEXT, kind TEXT NOT NULL DEFAULT 'entry',
    broker_status TEXT);
CREATE TABLE fills (fill_id TEXT PRIMARY KEY, client_order_id TEXT NOT NULL, symbol TEXT NOT NULL,
    side TEXT NOT NULL, qty REAL NOT NULL, price REAL NOT NULL, fee REAL NOT NULL, ts TEXT NOT NULL,
    kind TEXT NOT NULL, order_id TEXT);
CREATE TABLE submissions (n INTEGER PRIMARY KEY AUTOINCREMENT, client_order_id TEXT NOT NULL, at TEXT NOT NULL);
INSERT INTO intents VALUES ('mc-old', '2017-01-03T00:00:00+00:00', 'maxdiff', 'SP500', 'buy', 3, 'limit', 2250.5,
    2270.0, 'day', 'submitted', 'b1', NULL, 1, '2017-01-03T21:00:00.000+00:00', '2017-01-03T21:00:00.000+00:00',
    NULL, 'entry', 'filled');
INSERT INTO submissions (client_order_id, at) VALUES ('mc-old', '2017-01-03T21:00:00.000+00:00');
INSERT INTO fills VALUES ('f1', 'mc-old', 'SP500', 'buy', 1, 2250.0, 0, '2017-01-04T15:00:00+00:00', 'entry', 'b1');
INSERT INTO fills VALUES ('f2', 'mc-old', 'SP500', 'buy', 2, 2250.5, 0, '2017-01-04T15:30:00+00:00', 'entry', 'b1');
"""


def test_a_journal_from_before_the_blotter_gains_the_columns_and_lists_its_orders(tmp_path, capsys):
    conn = sqlite3.connect(tmp_path / "journal.db")
    conn.executescript(OLD_INTENTS)
    conn.close()
    assert main(["trade", "orders", "--state-dir", str(tmp_path), "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["submitted_at"] == "2017-01-03T21:00:00.000+00:00" and row["filled_at"] == "2017-01-04T15:30:00+00:00"
    assert (row["filled_qty"], row["avg_fill_price"]) == (3.0, pytest.approx((2250.0 + 2 * 2250.5) / 3))
    assert (row["asset_class"], row["cash_seen"], row["buying_power_seen"]) == (None, None, None)
    columns = {r[1] for r in sqlite3.connect(tmp_path / "journal.db").execute("PRAGMA table_info(intents)")}
    assert {"asset_class", "cash_seen", "buying_power_seen"} <= columns


def bad_state(tmp_path: Path, case: str) -> Path:
    state = tmp_path / "state"
    if case != "missing":
        state.mkdir()
    if case == "damaged":
        (state / "journal.db").write_bytes(b"this is not a database at all, it is text" * 100)
    if case == "not a journal":
        sqlite3.connect(state / "journal.db").executescript("CREATE TABLE things (x); INSERT INTO things VALUES (1);")
    return state


@pytest.mark.parametrize("case, code, says", [
    ("missing", 2, "no such state folder"),
    ("empty", 2, "no journal.db, not a state folder"),
    ("damaged", 3, "file is not a database"),
    ("not a journal", 3, "not a marketcast journal"),
])
def test_a_folder_that_is_no_state_folder_is_one_line(tmp_path, capsys, case, code, says):
    state = bad_state(tmp_path, case)
    before = sorted(p.name for p in state.iterdir()) if state.exists() else None
    assert main(["trade", "orders", "--state-dir", str(state), "--csv", str(tmp_path / "o.csv")]) == code
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o.csv").exists()
    assert (sorted(p.name for p in state.iterdir()) if state.exists() else None) == before
    if case == "not a journal":  # never given the journal's tables
        assert [r[0] for r in sqlite3.connect(state / "journal.db").execute("SELECT name FROM sqlite_master")] == [
            "things"]


@pytest.mark.parametrize("target, extra, code, says", [
    ("blocker/orders.csv", [], 3, "exists and is not a folder"),  # the parent is a file: cannot be written
    ("folder", [], 2, "is a folder; give a file name"),
    ("o.csv", ["--json"], 2, "--json and --csv: choose one"),
])
def test_a_csv_that_cannot_be_written_is_one_line_and_no_file(replayed, tmp_path, capsys, target, extra, code,
                                                              says):
    state, _ = replayed
    (tmp_path / "blocker").write_text("a file")
    (tmp_path / "folder").mkdir()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert main(["trade", "orders", "--state-dir", str(state), "--csv", str(tmp_path / target), *extra]) == code
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no file, no temporary left


def test_every_option_of_orders_has_help():
    import typer

    from marketcast.commands.trade import app

    params = typer.main.get_command(app).commands["orders"].params
    assert {p.opts[0] for p in params} == {"--state-dir", "--json", "--csv"}
    assert all((p.help or "").strip() for p in params)


@pytest.mark.parametrize("extra", [[], ["--json"], ["--html"]])
@pytest.mark.parametrize("case", ["missing", "empty", "/proc/self"])
def test_status_of_a_folder_that_is_no_state_folder_is_one_line(tmp_path, capsys, case, extra):
    """``trade status`` refuses what ``trade orders`` refuses: an empty folder or /proc/self used to print a
    status of 0 cycles and exit 0."""
    state = Path(case) if case.startswith("/") else bad_state(tmp_path, case)
    if case.startswith("/") and not state.is_dir():
        pytest.skip(f"{case} is not a folder on this system")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert main(["trade", "status", "--state-dir", str(state), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("not a state folder" in err[0] or "no such state dir" in err[0]), err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_a_records_file_that_is_not_text_is_named_in_one_line(tmp_path, capsys):
    """A records.jsonl of binary garbage used to end in "cannot read text as utf-8" without the file's name;
    lines of other JSON (a number, a list) are skipped as a torn line is."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "records.jsonl").write_bytes(b'{"decision_ts": "2020-01-02", "equity": 1}\n\xff\xfe\x00garbage\n')
    assert main(["trade", "status", "--state-dir", str(state)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{state / 'records.jsonl'}: byte 43 is not UTF-8 text" in err[0]
    (state / "records.jsonl").write_text('1\n[2]\n{"decision_ts": "2020-01-02", "equity": 5}\n')
    assert main(["trade", "status", "--state-dir", str(state), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["records"]["equity_last"] == 5
