"""The embedded paper broker: a simulated account in SQLite that fills orders bar by bar.

Every order lives for one bar (the day after its decision) and is settled with
:func:`marketcast.backtest.fills.settle` -- the backtest's own rule -- so a replay reproduces the
backtest's fills exactly: entry at the limit (or the open on a gap / market order), exit at the attached
take-profit if the bar trades through it, else at the bar's close. Fees follow ``settle`` too: ``per_side``
of the entry notional on each side (:mod:`marketcast.backtest.costs`), a short's borrow booked on its exit.
The broker keeps its own database, as a remote broker keeps its own books; the loop's journal is separate
and is reconciled against it.

It refuses what Alpaca would refuse, by the same model the loop checks with and the fake Alpaca answers with
(:func:`marketcast.trade.risk.protections.refusals`: the price grid, whole shares, crypto's time in force and
no shorts, buying power, wash trades against its own open orders, the take-profit's base price), so a replay
exercises the same rules the live loop does. It is a cash account: crypto and stocks draw on the same cash, and
it reports no day-trade count (pattern-day-trader protection is Alpaca's, for margin accounts). Its
crypto assets have no price grid (none is known without a broker) and the finest size Alpaca takes.
A submit is one transaction (its ``submit_log`` row and the order), so a kill never splits them.

With ``hold=True`` it holds instead, as Alpaca does (:mod:`marketcast.trade.venues.holding`): positions and
working orders live across bars, day orders expire at the close, ``gtc`` orders work on, a stock entry's
take-profit is a leg that fills when a later bar touches it, crypto's take-profit is the loop's own order, and
equity is cash plus the positions marked at their last close. Buying power is then ``multiplier`` x equity
(1x under the $2,000 margin floor, https://docs.alpaca.markets/docs/margin-and-short-selling) less the positions
and the open opening orders; crypto draws on cash alone (``non_marginable_buying_power``,
https://docs.alpaca.markets/docs/crypto-trading). ``multiplier`` 1 is a cash account.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
import pandas as pd

from marketcast.backtest.fills import settle
from marketcast.backtest.orders import LONG, SHORT, Bar, Costs, Decision
from marketcast.data.bars import Bars
from marketcast.trade.interface import Broker, BrokerError, DuplicateOrder, OrderRejected
from marketcast.trade.journal.db import connect, transaction
from marketcast.trade.risk.protections import Standing, refusals
from marketcast.trade.risk.rules import opening_value
from marketcast.trade.types import Asset
from marketcast.trade.venues import holding
from marketcast.trade.types import (
    BUY,
    CLS,
    LIMIT,
    MARKET,
    OPEN_STATUSES,
    Account,
    BarRow,
    Fill,
    Order,
    OrderRequest,
    Position,
    Quote,
    SELL,
    utc_time,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS orders (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT UNIQUE NOT NULL, client_order_id TEXT UNIQUE NOT NULL, symbol TEXT NOT NULL,
    side TEXT NOT NULL, qty REAL NOT NULL, type TEXT NOT NULL, limit_price REAL, take_profit REAL,
    time_in_force TEXT NOT NULL, status TEXT NOT NULL, submitted_at TEXT NOT NULL,
    filled_qty REAL NOT NULL DEFAULT 0, filled_avg_price REAL, done_at TEXT);
CREATE TABLE IF NOT EXISTS fills (
    fill_id TEXT PRIMARY KEY, client_order_id TEXT NOT NULL, symbol TEXT NOT NULL, side TEXT NOT NULL,
    qty REAL NOT NULL, price REAL NOT NULL, fee REAL NOT NULL, ts TEXT NOT NULL, kind TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS equity (ts TEXT PRIMARY KEY, equity REAL NOT NULL, cash REAL NOT NULL);
CREATE TABLE IF NOT EXISTS submit_log (n INTEGER PRIMARY KEY AUTOINCREMENT, client_order_id TEXT NOT NULL,
    outcome TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS positions (symbol TEXT PRIMARY KEY, qty REAL NOT NULL, avg REAL NOT NULL,
    opened_at TEXT NOT NULL);
"""
MARGIN_FLOOR = 2_000.0  # margin-and-short-selling: under this equity the account has 1x buying power
MODES = {False: "bar", True: "hold"}


def written_mode(db_path: str | Path) -> str | None:
    """How an existing ``broker.db`` settles (``bar`` | ``hold``; None: no such file, or from before the modes):
    read without writing, so a replay can refuse the other mode before it touches anything."""
    import sqlite3

    if not Path(db_path).is_file():
        return None
    with sqlite3.connect(f"file:{Path(db_path)}?mode=ro", uri=True) as c:
        try:
            row = c.execute("SELECT value FROM meta WHERE key='mode'").fetchone()
        except sqlite3.DatabaseError:
            return None  # not a broker database: the broker's own open says so
    return row[0] if row else None


def mode_mismatch(db_path: str | Path, hold: bool) -> str | None:
    """One line if ``db_path`` was written in the other mode, else None."""
    mode = written_mode(db_path)
    if mode is None or mode == MODES[hold]:
        return None
    if mode == "hold":
        return (f"{db_path} was written by the paper broker that holds as Alpaca does (a replay's); use a new state "
                "folder")
    return (f"{db_path} was written by a paper broker that settles every order within its bar (a replay made before "
            "the exit rule, or `trade run`'s); replay into a new state folder")


def iso(ts) -> str:
    return pd.Timestamp(ts).tz_convert("UTC").isoformat() if pd.Timestamp(ts).tzinfo else (
        pd.Timestamp(ts).tz_localize("UTC").isoformat()
    )


class PaperBroker(Broker):
    """Simulated account over ``bars``; ``advance_to(ts)`` is the replay clock."""

    name = "paper"
    has_quotes = False  # its quotes are made from bars: synthetic

    def __init__(
        self,
        db_path: str | Path,
        bars: Mapping[str, Bars],
        *,
        starting_cash: float = 100_000.0,
        fee: float | None = None,
        spread: float | None = None,
        slippage: float | None = None,
        borrow_rate: float | None = None,
        fill_mode: str = "touch",
        same_bar: str = "pessimistic",
        start: str | pd.Timestamp | None = None,
        hold: bool = False,
        multiplier: float = 1.0,
    ) -> None:
        self._fee, self._spread, self._slippage, self._borrow_rate = fee, spread, slippage, borrow_rate
        self.hold, self.multiplier = hold, float(multiplier)
        self.set_bars(bars)
        self.fill_mode, self.same_bar = fill_mode, same_bar
        self.endpoint = f"embedded paper broker ({Path(db_path).name})"
        self.conn = connect(db_path)
        self.conn.executescript(SCHEMA)
        if "parent" not in {r[1] for r in self.conn.execute("PRAGMA table_info(orders)")}:
            self.conn.execute("ALTER TABLE orders ADD COLUMN parent TEXT")  # a leg's entry (client id)
        with transaction(self.conn) as c:
            c.execute("INSERT OR IGNORE INTO meta VALUES ('mode', ?)", (MODES[hold],))
            c.execute("INSERT OR IGNORE INTO meta VALUES ('account_id', ?)", (f"paper-{uuid.uuid4()}",))
            c.execute("INSERT OR IGNORE INTO meta VALUES ('cash', ?)", (repr(float(starting_cash)),))
            if start is not None:
                c.execute("INSERT OR IGNORE INTO meta VALUES ('clock', ?)", (iso(start),))
        if self._meta("mode") != MODES[hold]:
            self.conn.close()
            raise BrokerError(mode_mismatch(db_path, hold))

    def set_bars(self, bars: Mapping[str, Bars]) -> None:
        """Trade on ``bars`` from now on (a file that grew is reloaded); what was settled stays settled."""
        self.bars = {s.upper(): b for s, b in bars.items()}
        self.costs = {s: Costs.for_asset(b.asset_class, self._fee, periods_per_year=b.periods_per_year,
                                         **self.cost_overrides(b.asset_class)) for s, b in self.bars.items()}
        self._index = {s: pd.DatetimeIndex(b.frame.index) for s, b in self.bars.items()}

    # ------------------------------------------------------------------ clock
    @property
    def clock(self) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key='clock'").fetchone()
        return row[0] if row else None

    def _meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def advance_to(self, ts, between: Callable[[pd.Timestamp], None] | None = None) -> int:
        """Settle every bar after the clock up to and including ``ts``; returns the bars processed.

        Each bar is one transaction (fills, cash, order status, equity, clock), so a kill between bars
        loses nothing and a repeated call is a no-op. Holding, a bar is two transactions and ``between(bar)``
        (the loop's look while the bar trades) runs between them; a kill after the first half finishes the bar
        at the next call, the look run again (the loop's looks are idempotent).
        """
        half = self._meta("half")
        if half is not None:  # a kill between the halves: finish that bar first
            if between is not None:
                between(pd.Timestamp(half))
            self._close_half(pd.Timestamp(half))
        target = pd.Timestamp(iso(ts))
        clock = self.clock
        stamps = sorted(
            {t for idx in self._index.values() for t in idx[(idx <= target) & (idx > pd.Timestamp(clock))]}
            if clock is not None
            else {t for idx in self._index.values() for t in idx[idx <= target][-1:]}
        )
        for stamp in stamps:
            if not self.hold:
                self._process_bar(stamp)
                continue
            self._open_half(stamp)
            if between is not None:
                between(stamp)
            self._close_half(stamp)
        return len(stamps)

    def _bar(self, symbol: str, stamp: pd.Timestamp) -> Bar | None:
        idx = self._index[symbol]
        pos = idx.searchsorted(stamp)
        if pos >= len(idx) or idx[pos] != stamp:
            return None
        row = self.bars[symbol].frame.iloc[pos]
        return Bar(float(row["open"]), float(row["high"]), float(row["low"]), float(row["close"]))

    def _process_bar(self, stamp: pd.Timestamp) -> None:
        ts = stamp.isoformat()
        with transaction(self.conn) as c:
            cash = float(c.execute("SELECT value FROM meta WHERE key='cash'").fetchone()[0])
            rows = c.execute(
                "SELECT * FROM orders WHERE status IN (%s) ORDER BY seq" % ",".join("?" * len(OPEN_STATUSES)),
                OPEN_STATUSES,
            ).fetchall()
            for o in rows:
                bar = self._bar(o["symbol"], stamp)
                if bar is None:
                    continue  # no bar for this symbol today (holiday / other market)
                cash += self._settle_order(c, o, bar, ts)
            c.execute("INSERT OR REPLACE INTO meta VALUES ('cash', ?)", (repr(cash),))
            c.execute("INSERT OR REPLACE INTO meta VALUES ('clock', ?)", (ts,))
            c.execute("INSERT OR REPLACE INTO equity VALUES (?, ?, ?)", (ts, cash, cash))

    def _settle_order(self, c, o, bar: Bar, ts: str) -> float:
        """Settle one order on ``bar`` inside the bar's transaction; returns the cash change."""
        side = LONG if o["side"] == BUY else SHORT
        decision = Decision(side, None if o["type"] == MARKET else o["limit_price"], o["take_profit"])
        costs = self.costs[o["symbol"]]
        s = settle(decision, bar, costs, self.fill_mode, self.same_bar)
        if not s.filled:
            if o["time_in_force"] != "gtc":
                c.execute("UPDATE orders SET status='expired', done_at=? WHERE id=?", (ts, o["id"]))
            return 0.0
        qty, cid, sym = o["qty"], o["client_order_id"], o["symbol"]
        fee = qty * s.entry_price * costs.per_side
        exit_fee = fee if side == LONG else qty * s.entry_price * (costs.per_side + costs.borrow)  # + borrow
        exit_side = "sell" if side == LONG else "buy"
        c.execute("INSERT INTO fills VALUES (?,?,?,?,?,?,?,?,?)",
                  (f"{cid}-entry", cid, sym, o["side"], qty, s.entry_price, fee, ts, "entry"))
        c.execute("INSERT INTO fills VALUES (?,?,?,?,?,?,?,?,?)",
                  (f"{cid}-exit", cid, sym, exit_side, qty, s.exit_price, exit_fee, ts, s.exit_reason))
        c.execute("UPDATE orders SET status='filled', filled_qty=?, filled_avg_price=?, done_at=? WHERE id=?",
                  (qty, s.entry_price, ts, o["id"]))
        return qty * s.entry_price * s.net_return

    # ------------------------------------------------------------------ holding (holding.py)
    def _working(self, c) -> list:
        q = "SELECT * FROM orders WHERE status IN (%s) ORDER BY seq" % ",".join("?" * len(holding.WORKING))
        return c.execute(q, holding.WORKING).fetchall()

    def _open_half(self, stamp: pd.Timestamp) -> None:
        """What worked when the bar opened fills (an entry with its leg by the backtest's rule); the clock moves to
        the bar and ``half`` marks the rest of it as still to play."""
        ts = stamp.isoformat()
        with transaction(self.conn) as c:
            cash = float(c.execute("SELECT value FROM meta WHERE key='cash'").fetchone()[0])
            for o in self._working(c):  # a gtc order GTC_DAYS old ends before the bar can fill it (a leg with it)
                if holding.lapsed(o, stamp):
                    c.execute("UPDATE orders SET status='expired', done_at=? WHERE id=? OR (parent=? AND status='held')",
                              (ts, o["id"], o["client_order_id"]))
            legs = {o["parent"]: o for o in self._working(c) if o["parent"] is not None}
            for o in self._working(c):
                bar = self._bar(o["symbol"], stamp)
                if bar is None or o["status"] == "held" or c.execute(
                        "SELECT status FROM orders WHERE id=?", (o["id"],)).fetchone()[0] not in holding.WORKING:
                    continue  # no session for it today, a leg waiting for its entry, or ended earlier in this bar
                costs, leg = self.costs[o["symbol"]], legs.get(o["client_order_id"])
                if leg is None:
                    price = holding.open_price(o, bar, self.fill_mode)
                    cash += 0.0 if price is None else self._hold_fill(c, o, price, ts)
                    continue
                both = holding.entry_with_leg(o, leg, bar, costs, self.fill_mode, self.same_bar)
                if both is None:
                    continue
                cash += self._hold_fill(c, o, both[0], ts)
                c.execute("UPDATE orders SET status='new' WHERE id=?", (leg["id"],))
                if both[1] is not None:
                    cash += self._hold_fill(c, leg, both[1], ts)
            mark = c.execute("SELECT COALESCE(MAX(seq), 0) FROM orders").fetchone()[0]
            c.execute("INSERT OR REPLACE INTO meta VALUES ('cash', ?)", (repr(cash),))
            c.execute("INSERT OR REPLACE INTO meta VALUES ('clock', ?)", (ts,))
            c.execute("INSERT OR REPLACE INTO meta VALUES ('half', ?)", (ts,))
            c.execute("INSERT OR REPLACE INTO meta VALUES ('mark', ?)", (str(mark),))

    def _close_half(self, stamp: pd.Timestamp) -> None:
        """What was sent while the bar traded fills only if the bar closes beyond it; day orders of a symbol
        that had this session end ``expired``; equity is marked at the close."""
        ts = stamp.isoformat()
        with transaction(self.conn) as c:
            cash = float(c.execute("SELECT value FROM meta WHERE key='cash'").fetchone()[0])
            mark = int(c.execute("SELECT value FROM meta WHERE key='mark'").fetchone()[0])
            for o in self._working(c):
                bar = self._bar(o["symbol"], stamp)
                if bar is None or o["seq"] <= mark or o["status"] == "held" or o["parent"] is not None:
                    continue
                price = holding.late_price(o, bar)
                if price is not None:
                    cash += self._hold_fill(c, o, price, ts)
                    c.execute("UPDATE orders SET status='new' WHERE parent=? AND status='held'", (o["client_order_id"],))
            for o in self._working(c):
                if o["time_in_force"] == "day" and self._bar(o["symbol"], stamp) is not None:
                    c.execute("UPDATE orders SET status='expired', done_at=? WHERE id=?", (ts, o["id"]))
            c.execute("INSERT OR REPLACE INTO meta VALUES ('cash', ?)", (repr(cash),))
            c.execute("DELETE FROM meta WHERE key='half'")
            equity = cash + sum(r[1] * self._close_at(r[0], stamp) for r in
                                c.execute("SELECT symbol, qty FROM positions").fetchall())
            c.execute("INSERT OR REPLACE INTO equity VALUES (?, ?, ?)", (ts, equity, cash))

    def _hold_fill(self, c, o, price: float, ts: str) -> float:
        """Fill order (or leg) ``o`` whole at ``price``: its fill row (a leg's under its entry's client id, as
        ``take_profit``), its status, the position; returns the cash change."""
        sym = o["symbol"]
        pos = c.execute("SELECT opened_at FROM positions WHERE symbol=?", (sym,)).fetchone()
        held = 0 if pos is None else holding.bars_between(self._index[sym], pos[0], pd.Timestamp(ts))
        booked = holding.book_fill(c, sym, o["side"], o["qty"], price, self.costs[sym], ts, held)
        leg = o["parent"] is not None
        c.execute("INSERT INTO fills VALUES (?,?,?,?,?,?,?,?,?)",
                  (f"{o['id']}-fill", o["parent"] if leg else o["client_order_id"], sym, o["side"], o["qty"], price,
                   booked.cost, ts, "take_profit" if leg else "entry"))
        c.execute("UPDATE orders SET status='filled', filled_qty=?, filled_avg_price=?, done_at=? WHERE id=?",
                  (o["qty"], price, ts, o["id"]))
        return -booked.signed * price - booked.cost

    def _close_at(self, symbol: str, stamp: pd.Timestamp) -> float:
        """The last close of ``symbol`` at or before ``stamp`` (a position is marked there)."""
        frame = self.bars[symbol].frame.loc[:stamp]
        return float(frame["close"].iloc[-1]) if len(frame) else 0.0

    # ------------------------------------------------------------------ Broker
    def cost_overrides(self, asset_class: str) -> dict:
        return {"spread": self._spread, "slippage": self._slippage, "borrow_rate": self._borrow_rate}

    def _cash(self) -> float:
        return float(self.conn.execute("SELECT value FROM meta WHERE key='cash'").fetchone()[0])

    def account(self) -> Account:
        """Settling within the bar, equity is cash between bars and buying power is cash less what open orders
        would draw (a cash account, as Alpaca counts open orders against it, shorts valued as Alpaca values
        them); crypto draws on the same cash (``non_marginable_buying_power``). Holding, equity is cash plus
        the positions at their last close, only opening orders draw, and stocks may use ``multiplier`` x
        equity (the module's docstring)."""
        cash = self._cash()
        account_id = self.conn.execute("SELECT value FROM meta WHERE key='account_id'").fetchone()[0]
        held = {p.symbol: p.qty for p in self.positions()} if self.hold else {}
        committed = sum(opening_value(OrderRequest(o.symbol, o.side, o.qty - o.filled_qty, o.client_order_id,
                                                   o.type, o.limit_price), self._last_close(o.symbol),
                                      self.asset(o.symbol).crypto)
                        for o in self.open_orders()
                        if (held.get(o.symbol, 0.0) >= 0) == (o.side == BUY) or not held.get(o.symbol, 0.0))
        if not self.hold:
            return Account(equity=cash, cash=cash, buying_power=cash - committed, id=account_id,
                           non_marginable_buying_power=cash - committed, crypto_status="ACTIVE")
        marks = {s: q * self._last_close(s) for s, q in held.items()}
        equity = cash + sum(marks.values())
        times = self.multiplier if equity >= MARGIN_FLOOR else min(self.multiplier, 1.0)
        power = times * equity - sum(abs(v) for v in marks.values()) - committed
        return Account(equity=equity, cash=cash, buying_power=max(0.0, power), id=account_id,
                       non_marginable_buying_power=max(0.0, cash - committed), crypto_status="ACTIVE")

    def asset(self, symbol: str) -> Asset:
        sym = symbol.upper()
        if sym in self.bars and self.bars[sym].is_crypto:
            return Asset(sym, "crypto", fractionable=True, shortable=False, easy_to_borrow=False)
        return Asset(sym, "stock")

    def positions(self) -> list[Position]:
        if self.hold:  # a long's free quantity: less what its working sells hold (a held leg holds nothing yet)
            selling: dict[str, float] = {}
            for o in self.open_orders():
                if o.side == SELL:
                    selling[o.symbol] = selling.get(o.symbol, 0.0) + o.qty - o.filled_qty
            return [Position(r[0], r[1], r[2], r[1] - selling.get(r[0], 0.0) if r[1] > 0 else r[1])
                    for r in self.conn.execute("SELECT symbol, qty, avg FROM positions ORDER BY symbol")]
        net: dict[str, float] = {}
        for r in self.conn.execute("SELECT symbol, side, qty FROM fills"):
            net[r[0]] = net.get(r[0], 0.0) + (r[2] if r[1] == BUY else -r[2])
        return [Position(s, q, 0.0, q) for s, q in sorted(net.items()) if abs(q) > 1e-12]

    def _last_close(self, symbol: str) -> float:
        bars = self.latest_bars(symbol, 1)
        return bars[-1].close if bars else 0.0

    @staticmethod
    def _order(r) -> Order:
        return Order(id=r["id"], client_order_id=r["client_order_id"], symbol=r["symbol"], side=r["side"],
                     qty=r["qty"], type=r["type"], status=r["status"], limit_price=r["limit_price"],
                     take_profit=r["take_profit"], filled_qty=r["filled_qty"],
                     filled_avg_price=r["filled_avg_price"], submitted_at=r["submitted_at"],
                     time_in_force=r["time_in_force"], parent_client_order_id=r["parent"])

    def open_orders(self) -> list[Order]:
        q = "SELECT * FROM orders WHERE status IN (%s) ORDER BY seq" % ",".join("?" * len(OPEN_STATUSES))
        return [self._order(r) for r in self.conn.execute(q, OPEN_STATUSES)]

    def orders(self, limit: int = 100) -> list[Order]:
        rows = self.conn.execute("SELECT * FROM orders ORDER BY seq DESC LIMIT ?", (limit,)).fetchall()
        return [self._order(r) for r in reversed(rows)]

    def order_history(self, since: str | None = None) -> list[Order]:
        """Every order submitted at or after ``since`` (all when None), oldest first; holding, a stock entry's
        take-profit leg follows it (settling within the bar there are no legs: the take-profit is settled with
        the entry)."""
        return [self._order(r) for r in self._since("orders", "submitted_at", since, "seq")]

    def order(self, order_id: str) -> Order | None:
        r = self.conn.execute("SELECT * FROM orders WHERE id=?", (order_id,)).fetchone()
        return self._order(r) if r else None

    def order_by_client_id(self, client_order_id: str) -> Order | None:
        r = self.conn.execute("SELECT * FROM orders WHERE client_order_id=?", (client_order_id,)).fetchone()
        return self._order(r) if r else None

    def _refusal(self, request: OrderRequest) -> str | None:
        """Why the broker refuses ``request`` (the rules model, as Alpaca would), or None."""
        sym = request.symbol.upper()
        if sym not in self.bars:
            return f"paper broker has no bars for {sym}"
        if request.time_in_force == CLS and not self.asset(sym).crypto:  # crypto's: the rules model's refusal
            if not self.hold:
                return "the paper broker that settles within the bar takes no cls order (one that holds does)"
            if not self.takes_cls(sym):
                return holding.CLS_LATE
        p = next((p for p in self.positions() if p.symbol == sym), None)
        standing = Standing(self.account(), self._last_close(sym), 0.0 if p is None else p.qty,
                            0.0 if p is None else p.available, self.open_orders())
        return "; ".join(r.message for r in refusals(request, self.asset(sym), standing)) or None

    def submit(self, request: OrderRequest) -> Order:
        """Accept, refuse (duplicate id, or the rules) and log the attempt in one transaction, so a test can
        prove the loop never sent an id twice and a kill never leaves a log row without its order."""
        sym = request.symbol.upper()
        clock = self.clock
        if clock is None:
            raise BrokerError("paper broker clock not started; call advance_to first")
        refusal = self._refusal(request)
        take_profit = request.take_profit if self.attaches_take_profit(sym) else None  # Alpaca crypto: no legs
        with transaction(self.conn) as c:
            duplicate = c.execute("SELECT 1 FROM orders WHERE client_order_id=?",
                                  (request.client_order_id,)).fetchone() is not None
            outcome = "duplicate" if duplicate else "rejected" if refusal else "accepted"
            c.execute("INSERT INTO submit_log (client_order_id, outcome) VALUES (?, ?)",
                      (request.client_order_id, outcome))
            if outcome == "accepted":
                seq = c.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM orders").fetchone()[0]
                c.execute(
                    "INSERT INTO orders (id, client_order_id, symbol, side, qty, type, limit_price, take_profit, "
                    "time_in_force, status, submitted_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (f"paper-{seq:08d}", request.client_order_id, sym, request.side, float(request.qty),
                     request.type, request.limit_price if request.type == LIMIT else None, take_profit,
                     request.time_in_force, "new", clock),
                )
                if self.hold and take_profit is not None:  # the OTO leg: its own order, held until the entry fills
                    c.execute(
                        "INSERT INTO orders (id, client_order_id, symbol, side, qty, type, limit_price, "
                        "time_in_force, status, submitted_at, parent) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                        (f"paper-{seq + 1:08d}", f"paper-leg-{seq + 1:08d}", sym, SELL if request.side == BUY else BUY,
                         float(request.qty), LIMIT, take_profit, request.time_in_force, "held", clock,
                         request.client_order_id))
        if duplicate:
            raise DuplicateOrder(f"client_order_id {request.client_order_id} must be unique")
        if refusal:
            raise OrderRejected(f"{request.client_order_id}: {refusal}")
        return self.order_by_client_id(request.client_order_id)

    def cancel(self, order_id: str) -> None:
        """Cancel a working order (and its held leg: it goes with its entry), or a working leg alone."""
        with transaction(self.conn) as c:
            c.execute("UPDATE orders SET status='canceled', done_at=? WHERE id=? AND status IN ('new','accepted')",
                      (self.clock, order_id))
            c.execute("UPDATE orders SET status='canceled', done_at=? WHERE status='held' AND parent="
                      "(SELECT client_order_id FROM orders WHERE id=? AND status='canceled')", (self.clock, order_id))

    def takes_cls(self, symbol: str) -> bool:
        """Holding, while a bar of ``symbol`` trades (between the bar's halves: before its cutoff); its clock has
        no minutes, so at any other time the cutoff has passed (:mod:`~marketcast.trade.venues.holding`)."""
        half = self._meta("half")
        sym = symbol.upper()
        return self.hold and half is not None and sym in self._index and self._bar(sym, pd.Timestamp(half)) is not None

    def attaches_take_profit(self, symbol: str) -> bool:
        """Holding, as Alpaca: stocks carry an OTO leg, crypto none (the loop sends it). Settling within the bar,
        every entry's take-profit is settled with it."""
        return not (self.hold and self.asset(symbol).crypto)

    def fills(self, since: str | None = None) -> list[Fill]:
        """Fills at or after ``since``, compared as times (any spelling of ``since``); SQL narrows the rows by
        whole second first (this database writes UTC ISO times, so their first 19 characters sort as times)."""
        rows = self._since("fills", "ts", since, "ts, fill_id")
        return [Fill(r["fill_id"], r["client_order_id"], r["symbol"], r["side"], r["qty"], r["price"], r["fee"],
                     r["ts"], r["kind"]) for r in rows]

    def _since(self, table: str, column: str, since: str | None, order: str) -> list:
        if since is None:
            return self.conn.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()
        t = utc_time(since)
        rows = self.conn.execute(f"SELECT * FROM {table} WHERE substr({column}, 1, 19) >= ? ORDER BY {order}",
                                 (t.floor("s").strftime("%Y-%m-%dT%H:%M:%S"),)).fetchall()
        return [r for r in rows if utc_time(r[column]) >= t]

    def latest_quote(self, symbol: str) -> Quote | None:
        """The close of the bar at the clock, widened by the configured spread: made from bars, so
        ``synthetic`` (there is no live feed), and its mid is the close."""
        bars = self.latest_bars(symbol, 1)
        if not bars:
            return None
        close, half = bars[-1].close, self.costs[symbol.upper()].spread / 2.0
        return Quote(symbol.upper(), close * (1 - half), close * (1 + half), bars[-1].timestamp, "synthetic")

    def latest_bars(self, symbol: str, limit: int) -> list[BarRow]:
        sym = symbol.upper()
        clock = self.clock
        if sym not in self.bars or clock is None:
            return []
        frame = self.bars[sym].frame.loc[: pd.Timestamp(clock)].iloc[-limit:]
        return [BarRow(t.isoformat(), r.open, r.high, r.low, r.close, float(getattr(r, "volume", 0.0)))
                for t, r in zip(frame.index, frame.itertuples())]

    def equity_curve(self) -> pd.Series:
        rows = self.conn.execute("SELECT ts, equity FROM equity ORDER BY ts").fetchall()
        return pd.Series([r[1] for r in rows], index=pd.DatetimeIndex([r[0] for r in rows]), name="equity",
                         dtype=np.float64)

    def submit_log(self) -> list[tuple[str, str]]:
        """Every submit that reached the broker: (client_order_id, accepted | duplicate | rejected)."""
        return [(r[0], r[1]) for r in self.conn.execute("SELECT client_order_id, outcome FROM submit_log ORDER BY n")]

    def close(self) -> None:
        self.conn.close()


