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
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Mapping

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
from marketcast.trade.types import (
    BUY,
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
"""


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
    ) -> None:
        self._fee, self._spread, self._slippage, self._borrow_rate = fee, spread, slippage, borrow_rate
        self.set_bars(bars)
        self.fill_mode, self.same_bar = fill_mode, same_bar
        self.endpoint = f"embedded paper broker ({Path(db_path).name})"
        self.conn = connect(db_path)
        self.conn.executescript(SCHEMA)
        with transaction(self.conn) as c:
            c.execute("INSERT OR IGNORE INTO meta VALUES ('account_id', ?)", (f"paper-{uuid.uuid4()}",))
            c.execute("INSERT OR IGNORE INTO meta VALUES ('cash', ?)", (repr(float(starting_cash)),))
            if start is not None:
                c.execute("INSERT OR IGNORE INTO meta VALUES ('clock', ?)", (iso(start),))

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

    def advance_to(self, ts) -> int:
        """Settle every bar after the clock up to and including ``ts``; returns the bars processed.

        Each bar is one transaction (fills, cash, order status, equity, clock), so a kill between bars
        loses nothing and a repeated call is a no-op.
        """
        target = pd.Timestamp(iso(ts))
        clock = self.clock
        stamps = sorted(
            {t for idx in self._index.values() for t in idx[(idx <= target) & (idx > pd.Timestamp(clock))]}
            if clock is not None
            else {t for idx in self._index.values() for t in idx[idx <= target][-1:]}
        )
        for stamp in stamps:
            self._process_bar(stamp)
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

    # ------------------------------------------------------------------ Broker
    def cost_overrides(self, asset_class: str) -> dict:
        return {"spread": self._spread, "slippage": self._slippage, "borrow_rate": self._borrow_rate}

    def _cash(self) -> float:
        return float(self.conn.execute("SELECT value FROM meta WHERE key='cash'").fetchone()[0])

    def account(self) -> Account:
        """Equity is cash between bars (every order round-trips within its bar); buying power is cash less
        what open orders would draw (a cash account, as Alpaca counts open orders against it, shorts valued as
        Alpaca values them); crypto draws on the same cash (``non_marginable_buying_power``)."""
        cash = self._cash()
        account_id = self.conn.execute("SELECT value FROM meta WHERE key='account_id'").fetchone()[0]
        committed = sum(opening_value(OrderRequest(o.symbol, o.side, o.qty, o.client_order_id, o.type,
                                                   o.limit_price), self._last_close(o.symbol),
                                      self.asset(o.symbol).crypto)
                        for o in self.open_orders())
        return Account(equity=cash, cash=cash, buying_power=cash - committed, id=account_id,
                       non_marginable_buying_power=cash - committed, crypto_status="ACTIVE")

    def asset(self, symbol: str) -> Asset:
        sym = symbol.upper()
        if sym in self.bars and self.bars[sym].is_crypto:
            return Asset(sym, "crypto", fractionable=True, shortable=False, easy_to_borrow=False)
        return Asset(sym, "stock")

    def positions(self) -> list[Position]:
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
                     time_in_force=r["time_in_force"])

    def open_orders(self) -> list[Order]:
        q = "SELECT * FROM orders WHERE status IN (%s) ORDER BY seq" % ",".join("?" * len(OPEN_STATUSES))
        return [self._order(r) for r in self.conn.execute(q, OPEN_STATUSES)]

    def orders(self, limit: int = 100) -> list[Order]:
        rows = self.conn.execute("SELECT * FROM orders ORDER BY seq DESC LIMIT ?", (limit,)).fetchall()
        return [self._order(r) for r in reversed(rows)]

    def order_history(self, since: str | None = None) -> list[Order]:
        """Every order submitted at or after ``since`` (all when None), oldest first (the paper broker has no
        legs: its take-profit is settled with the entry)."""
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
                     request.type, request.limit_price if request.type == LIMIT else None, request.take_profit,
                     request.time_in_force, "new", clock),
                )
        if duplicate:
            raise DuplicateOrder(f"client_order_id {request.client_order_id} must be unique")
        if refusal:
            raise OrderRejected(f"{request.client_order_id}: {refusal}")
        return self.order_by_client_id(request.client_order_id)

    def cancel(self, order_id: str) -> None:
        with transaction(self.conn) as c:
            c.execute("UPDATE orders SET status='canceled', done_at=? WHERE id=? AND status IN ('new','accepted')",
                      (self.clock, order_id))

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


