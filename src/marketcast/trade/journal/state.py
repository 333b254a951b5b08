"""The loop's journal: what it intended, what the broker answered, which cycles finished, what it owns.

Write-ahead: an intent row (status ``pending``) is committed *before* the broker call and updated
(``submitted``/``rejected``) in a second transaction after it. A kill between the two leaves a pending
intent that :meth:`Journal.pending` hands to reconciliation, which asks the broker by ``client_order_id``
instead of guessing. Cancels get the same treatment in their own table (``pending`` -> ``done``/``failed``).

Intent statuses: ``pending`` (written, maybe sent), ``submitted`` (the broker has it; ``broker_status`` is
its last known status there), ``rejected`` (refused by the broker, at once or after accepting it),
``refused`` (the rules model found no valid form; never sent), ``abandoned`` (its bar passed before it was
sent), ``lost`` (the broker did not know it and ``trade reconcile --accept-broker`` accepted that).
An intent also keeps its asset class and the account figures its check saw (``cash_seen``,
``buying_power_seen``), written with it, for the blotter (:mod:`marketcast.trade.ops.blotter`).
The journal is bound to one broker account (``meta``); ``adjustments`` hold the owned quantities
``--accept-broker`` corrected; ``halts`` the halted state (:mod:`marketcast.trade.journal.halts`).

A journal carries ``PRAGMA application_id`` :data:`APP_ID` and ``user_version`` :data:`SCHEMA_VERSION`; a
``journal.db`` that is another program's database is refused before anything writes to it
(:func:`~marketcast.trade.journal.db.check_owned`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from marketcast.trade.journal.db import (
    add_missing_columns,
    check_owned,
    connect,
    connect_readonly,
    transaction,
)
from marketcast.trade.journal.halts import Halts
from marketcast.trade.types import Fill, OrderRequest, utc_text, utc_time

log = logging.getLogger("marketcast.trade")

SCHEMA = """
CREATE TABLE IF NOT EXISTS intents (
    client_order_id TEXT PRIMARY KEY, decision_ts TEXT NOT NULL, strategy TEXT NOT NULL,
    symbol TEXT NOT NULL, side TEXT NOT NULL, qty REAL NOT NULL, type TEXT NOT NULL,
    limit_price REAL, take_profit REAL, time_in_force TEXT NOT NULL, status TEXT NOT NULL,
    broker_order_id TEXT, error TEXT, attempts INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL, decision TEXT, kind TEXT NOT NULL DEFAULT 'entry',
    broker_status TEXT, asset_class TEXT, cash_seen REAL, buying_power_seen REAL);
CREATE TABLE IF NOT EXISTS fills (
    fill_id TEXT PRIMARY KEY, client_order_id TEXT NOT NULL, symbol TEXT NOT NULL, side TEXT NOT NULL,
    qty REAL NOT NULL, price REAL NOT NULL, fee REAL NOT NULL, ts TEXT NOT NULL, kind TEXT NOT NULL,
    order_id TEXT);
CREATE TABLE IF NOT EXISTS cancels (
    order_id TEXT PRIMARY KEY, client_order_id TEXT NOT NULL, symbol TEXT NOT NULL, decision_ts TEXT NOT NULL,
    reason TEXT NOT NULL, status TEXT NOT NULL, error TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cycles (
    clock TEXT NOT NULL DEFAULT '', decision_ts TEXT NOT NULL, status TEXT NOT NULL, started_at TEXT NOT NULL,
    finished_at TEXT, PRIMARY KEY (clock, decision_ts));
CREATE TABLE IF NOT EXISTS submissions (
    n INTEGER PRIMARY KEY AUTOINCREMENT, client_order_id TEXT NOT NULL, at TEXT NOT NULL, wall_at TEXT);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS adjustments (
    n INTEGER PRIMARY KEY AUTOINCREMENT, symbol TEXT NOT NULL, qty REAL NOT NULL, reason TEXT NOT NULL,
    at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS shadow_decisions (
    decision_ts TEXT NOT NULL, symbol TEXT NOT NULL, role TEXT NOT NULL, model TEXT NOT NULL,
    side INTEGER NOT NULL, close REAL NOT NULL, pnl REAL, settled_ts TEXT, quantiles TEXT, ret REAL,
    forecaster TEXT,
    PRIMARY KEY (decision_ts, symbol, role));
CREATE TABLE IF NOT EXISTS shadow_errors (
    decision_ts TEXT NOT NULL, symbol TEXT NOT NULL, model TEXT NOT NULL, error TEXT NOT NULL, at TEXT NOT NULL,
    PRIMARY KEY (decision_ts, symbol));
CREATE TABLE IF NOT EXISTS active_model (
    slot INTEGER PRIMARY KEY CHECK (slot = 1), weights TEXT NOT NULL, since TEXT NOT NULL, model TEXT);
CREATE TABLE IF NOT EXISTS promotions (
    n INTEGER PRIMARY KEY AUTOINCREMENT, old TEXT, new TEXT NOT NULL, n_pairs INTEGER NOT NULL,
    mean_diff REAL NOT NULL, p REAL NOT NULL, at TEXT NOT NULL);
"""
TERMINAL_INTENTS = ("rejected", "refused", "abandoned", "lost")
APP_ID = 0x4D434A4C  # "MCJL": marketcast journal (https://www.sqlite.org/pragma.html#pragma_application_id)
SCHEMA_VERSION = 3  # 2: shadow_decisions, active_model, promotions (trade/loop/shadow.py); 3: the decisions'
# close-return quantiles and settled return, shadow_errors, the active model's name (trade/journal/shadow.py)
# every table a journal can hold: SCHEMA's, halts.py's and risk.py's (equity_days, sends)
TABLES = {"intents", "fills", "cancels", "cycles", "submissions", "meta", "adjustments", "halts", "equity_days",
          "sends", "shadow_decisions", "active_model", "promotions", "shadow_errors"}
# what every journal has held since the first (before the application id): a file without the id is a journal
# only if it has these tables with these columns (a foreign file with an ``intents`` table of its own is not)
FIRST_SCHEMA = {"intents": {"client_order_id", "decision_ts", "strategy", "symbol", "side", "qty", "type", "status"},
                "fills": {"fill_id", "client_order_id", "symbol", "side", "qty", "price", "ts"},
                "submissions": {"client_order_id", "at"}}
INTENT_COLUMNS = {"broker_status": "TEXT", "asset_class": "TEXT", "cash_seen": "REAL", "buying_power_seen": "REAL"}
# schema 3: the close-return quantiles (JSON), the settled return, the model's name (``--model``; its weights are
# ``model``); a version-2 journal's rows keep NULL (unscored)
SHADOW_COLUMNS = {"quantiles": "TEXT", "ret": "REAL", "forecaster": "TEXT",
                  "cost": "REAL"}  # the backtest's round trip of the decision (NULL: journalled before)
ACTIVE_COLUMNS = {"model": "TEXT"}  # schema 3: NULL = the model trade run was given (a version-2 promotion)
# a POST's time on the loop's clock (``at``: simulated in a replay) and on the wall clock (NULL: from before)
SUBMISSION_COLUMNS = {"wall_at": "TEXT"}


def check_journal(path: str | Path) -> bool:
    """Refuse (exit 3, the file left untouched) a ``journal.db`` that is not marketcast's, reading it only; True
    when there is none yet. Called before anything of the state folder is written."""
    return check_owned(path, APP_ID, TABLES, "journal", SCHEMA_VERSION, FIRST_SCHEMA)


# What a state folder is made under and keeps (its journal's meta rows, yes/no for a switch): the exit rule,
# a replay's --hold
BOUND_FLAGS = {"exit": "--exit", "hold": "--hold"}


def setting_mismatch(path: str | Path, **values: str) -> str | None:
    """One line if the journal at ``path`` was made under another value of one of ``values`` (meta keys of
    :data:`BOUND_FLAGS`), else None; read without writing, so a run can refuse before it touches anything."""
    import sqlite3

    if not Path(path).is_file():
        return None
    with sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True) as c:
        try:
            kept = dict(c.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError:
            return None  # not a journal yet: the journal's own open says so
    for key, value in values.items():
        if kept.get(key, value) != value:
            was = {"yes": f"with {BOUND_FLAGS[key]}", "no": f"without {BOUND_FLAGS[key]}"}.get(
                kept[key], f"with {BOUND_FLAGS[key]} {kept[key]}")
            return f"{Path(path).parent} was made {was}; run it {was} as it was made, or use a new state folder"
    return None


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class Intent:
    client_order_id: str
    decision_ts: str
    strategy: str
    symbol: str
    side: str
    qty: float
    type: str
    limit_price: float | None
    take_profit: float | None
    time_in_force: str
    status: str = "pending"
    broker_order_id: str | None = None
    error: str | None = None
    decision: str | None = None  # JSON of the Decision (side, entry_limit, take_profit)
    kind: str = "entry"  # entry | close (leftover) | take_profit (sent apart from its entry) | adopted
    broker_status: str | None = None  # the order's last status at the broker
    asset_class: str | None = None  # the broker's class of the symbol (stock | crypto)
    cash_seen: float | None = None  # the account's cash when the order was checked (None: from before this)
    buying_power_seen: float | None = None  # ... and what it could draw on (crypto: non-marginable)


def request_of(intent: Intent) -> OrderRequest:
    """The order ``intent`` journals, as a broker is asked for it."""
    return OrderRequest(intent.symbol, intent.side, intent.qty, intent.client_order_id, intent.type,
                        intent.limit_price, intent.take_profit, intent.time_in_force)


@dataclass(frozen=True)
class Booked:
    """One journal fill with the decision bar and role of the intent it belongs to."""

    symbol: str
    side: str
    qty: float
    decision_ts: str
    kind: str


class Journal:
    """SQLite journal in ``state_dir/journal.db``; ``read_only`` (``trade status``) creates and changes no file,
    except to upgrade a journal an older marketcast wrote (our tables or columns missing), as opening it for
    writing does."""

    def __init__(self, path: str | Path, read_only: bool = False) -> None:
        self.path = Path(path)
        self.clock: Callable[[], str] | None = None  # the loop's clock, when not the wall's (a replay's bars)
        if read_only and self.path.exists():
            check_journal(path)
            self.conn = connect_readonly(path)
            if not _needs_upgrade(self.conn):
                self.halts = Halts(self.conn, self.loop_time)  # its CREATE ... IF NOT EXISTS reads only
                return
            self.conn.close()
        check_journal(path)
        self.conn = connect(path)
        _clocked_cycles(self.conn)
        self.conn.executescript(SCHEMA)
        add_missing_columns(self.conn, "intents", INTENT_COLUMNS)
        add_missing_columns(self.conn, "shadow_decisions", SHADOW_COLUMNS)
        add_missing_columns(self.conn, "active_model", ACTIVE_COLUMNS)
        add_missing_columns(self.conn, "submissions", SUBMISSION_COLUMNS)
        self.halts = Halts(self.conn, self.loop_time)  # a halt's since and lifted_at: the loop's clock
        for pragma, value in (("application_id", APP_ID), ("user_version", SCHEMA_VERSION)):
            if self.conn.execute(f"PRAGMA {pragma}").fetchone()[0] != value:  # written once, not on every open
                self.conn.execute(f"PRAGMA {pragma} = {value}")

    def loop_time(self) -> str:
        """Now on the loop's clock: a replay's simulated time (the bar its paper broker stands on), else the
        wall clock's, so a replay's blotter and halts tell one time."""
        at = None if self.clock is None else self.clock()
        return now() if at is None else utc_text(at)

    # -------------------------------------------------------------- binding
    def meta(self) -> dict[str, str]:
        return {r[0]: r[1] for r in self.conn.execute("SELECT key, value FROM meta").fetchall()}

    def set_meta(self, **values: str) -> None:
        with transaction(self.conn) as c:
            for k, v in values.items():
                c.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (k, str(v)))

    # -------------------------------------------------------------- cycles
    # A cycle is one (clock, bar): each market decides on its own bars (``clock`` is the asset class whose
    # calendar it follows: crypto 24/7, stock NYSE, forex 24/5), so a crypto bar on a Saturday is a cycle of
    # the crypto clock alone. ``''`` is a cycle of every symbol at once (a journal from before clocks).
    def cycle_done(self, decision_ts: str, clock: str = "") -> bool:
        r = self.conn.execute("SELECT status FROM cycles WHERE decision_ts=? AND clock=?",
                              (decision_ts, clock)).fetchone()
        return bool(r) and r[0] == "done"

    def start_cycle(self, decision_ts: str, clock: str = "") -> None:
        with transaction(self.conn) as c:
            c.execute("INSERT OR IGNORE INTO cycles VALUES (?, ?, 'started', ?, NULL)", (clock, decision_ts, now()))

    def finish_cycle(self, decision_ts: str, clock: str = "") -> None:
        with transaction(self.conn) as c:
            c.execute("UPDATE cycles SET status='done', finished_at=? WHERE decision_ts=? AND clock=?",
                      (now(), decision_ts, clock))

    def last_done_cycle(self, clock: str | None = None) -> str | None:
        """The newest finished bar of ``clock`` (a pre-clock cycle counts for every clock), or of any clock."""
        if clock is None:
            return self.conn.execute("SELECT MAX(decision_ts) FROM cycles WHERE status='done'").fetchone()[0]
        return self.conn.execute("SELECT MAX(decision_ts) FROM cycles WHERE status='done' AND clock IN (?, '')",
                                 (clock,)).fetchone()[0]

    def first_cycle(self) -> str | None:
        """The loop's first decision bar: the planner learns MaxDiff offsets from there on, as a backtest
        started there would."""
        return self.conn.execute("SELECT MIN(decision_ts) FROM cycles").fetchone()[0]

    # -------------------------------------------------------------- intents
    def intent(self, client_order_id: str) -> Intent | None:
        r = self.conn.execute("SELECT * FROM intents WHERE client_order_id=?", (client_order_id,)).fetchone()
        return _intent(r) if r else None

    def record_intent(self, intent: Intent) -> Intent:
        """Insert an intent as given, normally ``pending`` (no-op if the id exists); returns the stored row."""
        t = now()
        with transaction(self.conn) as c:
            c.execute(
                "INSERT OR IGNORE INTO intents (client_order_id, decision_ts, strategy, symbol, side, qty, type, "
                "limit_price, take_profit, time_in_force, status, broker_order_id, error, attempts, created_at, "
                "updated_at, decision, kind, broker_status, asset_class, cash_seen, buying_power_seen) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,0,?,?,?,?,?,?,?,?)",
                (intent.client_order_id, intent.decision_ts, intent.strategy, intent.symbol, intent.side,
                 intent.qty, intent.type, intent.limit_price, intent.take_profit, intent.time_in_force,
                 intent.status, intent.broker_order_id, intent.error, t, t, intent.decision, intent.kind,
                 intent.broker_status, intent.asset_class, intent.cash_seen, intent.buying_power_seen),
            )
        return self.intent(intent.client_order_id)

    def mark_attempt(self, client_order_id: str) -> None:
        """Counted before the broker call: ``submissions`` lists every POST the loop ever made, at the loop's
        clock's time (a replay's simulated bar, as its fills) and at the wall clock's."""
        wall, at = now(), self.loop_time()
        with transaction(self.conn) as c:
            c.execute("UPDATE intents SET attempts = attempts + 1, updated_at=? WHERE client_order_id=?",
                      (wall, client_order_id))
            c.execute("INSERT INTO submissions (client_order_id, at, wall_at) VALUES (?, ?, ?)",
                      (client_order_id, at, wall))

    def mark(self, client_order_id: str, status: str, broker_order_id: str | None = None,
             error: str | None = None, broker_status: str | None = None) -> None:
        with transaction(self.conn) as c:
            c.execute(
                "UPDATE intents SET status=?, broker_order_id=COALESCE(?, broker_order_id), error=?, updated_at=?, "
                "broker_status=COALESCE(?, broker_status) WHERE client_order_id=?",
                (status, broker_order_id, error, now(), broker_status, client_order_id),
            )

    def set_broker_status(self, statuses: dict[str, str]) -> None:
        """The broker's current status of submitted intents (``client_order_id -> status``), in one go."""
        with transaction(self.conn) as c:
            c.executemany("UPDATE intents SET broker_status=? WHERE client_order_id=? AND broker_status IS NOT ?",
                          [(s, cid, s) for cid, s in statuses.items()])

    def rejected_count(self) -> int:
        """Orders the broker refused, at once or after accepting them, over the journal's life."""
        return self.conn.execute("SELECT COUNT(*) FROM intents WHERE status='rejected'").fetchone()[0]

    def intent_ids(self) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT client_order_id FROM intents").fetchall()}

    def pending(self) -> list[Intent]:
        return [_intent(r) for r in self.conn.execute("SELECT * FROM intents WHERE status='pending'")]

    def intents(self) -> list[Intent]:
        return [_intent(r) for r in self.conn.execute("SELECT * FROM intents ORDER BY decision_ts, symbol")]

    # -------------------------------------------------------------- cancels
    def record_cancel(self, order_id: str, client_order_id: str, symbol: str, decision_ts: str, reason: str) -> None:
        """Committed before the broker's cancel call (a failed one is retried as pending)."""
        t = now()
        with transaction(self.conn) as c:
            c.execute("INSERT OR IGNORE INTO cancels VALUES (?,?,?,?,?,'pending',NULL,?,?)",
                      (order_id, client_order_id, symbol, decision_ts, reason, t, t))
            c.execute("UPDATE cancels SET status='pending', updated_at=? WHERE order_id=? AND status='failed'",
                      (t, order_id))

    def mark_cancel(self, order_id: str, status: str, error: str | None = None) -> None:
        with transaction(self.conn) as c:
            c.execute("UPDATE cancels SET status=?, error=?, updated_at=? WHERE order_id=?",
                      (status, error, now(), order_id))

    def cancels(self, status: str | None = None) -> list[dict]:
        q, args = "SELECT * FROM cancels", ()
        if status is not None:
            q, args = q + " WHERE status=?", (status,)
        return [dict(r) for r in self.conn.execute(q + " ORDER BY created_at, order_id", args)]

    # -------------------------------------------------------------- fills
    def add_fills(self, fills: list[Fill]) -> int:
        """Store fills not seen before; returns how many orders got their first entry fill.

        Only the loop's own orders count (a fill without an intent is someone else's, never booked). A fill's
        kind follows the journal's intent for its ``client_order_id`` (a close or a separate take-profit is
        not an entry). A cumulative snapshot (``cum_qty`` set) is stored as the increment over what this
        order already has, at the increment's own price, or not at all if nothing is new.
        """
        with transaction(self.conn) as c:
            before = c.execute("SELECT COUNT(DISTINCT client_order_id) FROM fills WHERE kind='entry'").fetchone()[0]
            for f in fills:
                if c.execute("SELECT 1 FROM fills WHERE fill_id=?", (f.fill_id,)).fetchone():
                    continue
                intent = c.execute("SELECT kind FROM intents WHERE client_order_id=?", (f.client_order_id,)).fetchone()
                if intent is None:
                    continue
                kind = intent[0] if f.kind == "entry" else f.kind
                qty, price = f.qty, f.price
                if f.cum_qty is not None:
                    had, notional = c.execute("SELECT COALESCE(SUM(qty), 0), COALESCE(SUM(qty * price), 0) FROM fills "
                                              "WHERE order_id=?", (f.order_id,)).fetchone()
                    qty = round(f.cum_qty - had, 12)
                    if qty <= 0:
                        continue
                    price = (f.cum_qty * f.price - notional) / qty
                c.execute("INSERT INTO fills VALUES (?,?,?,?,?,?,?,?,?,?)",
                          (f.fill_id, f.client_order_id, f.symbol, f.side, qty, price, f.fee, f.timestamp, kind,
                           f.order_id))
                log.info("%s fill %s: %s %g @ %.10g (%s, %s) booked", f.symbol, f.client_order_id, f.side, qty, price,
                         kind, f.timestamp)
            after = c.execute("SELECT COUNT(DISTINCT client_order_id) FROM fills WHERE kind='entry'").fetchone()[0]
        return after - before

    def fills(self) -> list[Fill]:
        """Every fill, oldest first by time (not by text: ``...:00.1Z`` is later than ``...:00Z``)."""
        rows = self.conn.execute("SELECT * FROM fills ORDER BY rowid").fetchall()
        rows.sort(key=lambda r: (bool(r["ts"]), utc_time(r["ts"]) if r["ts"] else 0, r["fill_id"]))  # no time: first
        return [Fill(r["fill_id"], r["client_order_id"], r["symbol"], r["side"], r["qty"], r["price"], r["fee"],
                     r["ts"], r["kind"], r["order_id"]) for r in rows]

    def booked(self) -> list[Booked]:
        """Every fill with the decision bar and role of its intent (what the loop owns comes from these)."""
        rows = self.conn.execute("SELECT f.symbol, f.side, f.qty, i.decision_ts, i.kind FROM fills f "
                                 "JOIN intents i ON i.client_order_id = f.client_order_id").fetchall()
        return [Booked(r[0], r[1], float(r[2]), r[3], r[4]) for r in rows]

    def filled_qty(self, client_order_id: str, kind: str = "entry") -> float:
        r = self.conn.execute("SELECT COALESCE(SUM(qty), 0) FROM fills WHERE client_order_id=? AND kind=?",
                              (client_order_id, kind)).fetchone()
        return float(r[0])

    def last_fill_ts(self) -> str | None:
        """The newest fill's time, compared as a time, not as text (SQL's ``MAX(ts)`` would rank
        ``...:00Z`` above ``...:00.5Z``), in :func:`~marketcast.trade.types.utc_text`'s spelling."""
        stamps = [r[0] for r in self.conn.execute("SELECT DISTINCT ts FROM fills WHERE ts != ''")]
        return utc_text(max(stamps, key=utc_time)) if stamps else None

    # -------------------------------------------------------------- adjustments
    def adjust(self, symbol: str, qty: float, reason: str) -> None:
        with transaction(self.conn) as c:
            c.execute("INSERT INTO adjustments (symbol, qty, reason, at) VALUES (?,?,?,?)", (symbol, qty, reason, now()))

    def adjustments(self) -> dict[str, float]:
        rows = self.conn.execute("SELECT symbol, SUM(qty) FROM adjustments GROUP BY symbol").fetchall()
        return {r[0]: float(r[1]) for r in rows}

    def submission_counts(self) -> dict[str, int]:
        rows = self.conn.execute("SELECT client_order_id, COUNT(*) FROM submissions GROUP BY client_order_id")
        return {r[0]: r[1] for r in rows}

    def close(self) -> None:
        self.conn.close()


def _needs_upgrade(conn) -> bool:
    """Whether a journal lacks a table or column this code reads (one an older marketcast wrote)."""
    have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()}
    if not {"intents", "fills", "cancels", "cycles", "meta", "adjustments", "halts", "submissions",
            "shadow_decisions", "active_model", "promotions", "shadow_errors"} <= have:
        return True
    columns = {t: {r[1] for r in conn.execute(f"PRAGMA table_info({t})").fetchall()}
               for t in ("intents", "cycles", "shadow_decisions", "active_model", "submissions")}
    return (not set(INTENT_COLUMNS) <= columns["intents"] or "clock" not in columns["cycles"]
            or not set(SUBMISSION_COLUMNS) <= columns["submissions"]
            or not set(SHADOW_COLUMNS) <= columns["shadow_decisions"]
            or not set(ACTIVE_COLUMNS) <= columns["active_model"])


def _clocked_cycles(conn) -> None:
    """A journal from before per-symbol clocks keyed cycles by bar alone: rebuild the table keyed by (clock,
    bar), its rows kept as cycles of every symbol (``clock`` ``''``), in one transaction."""
    columns = [r[1] for r in conn.execute("PRAGMA table_info(cycles)").fetchall()]
    if not columns or "clock" in columns:
        return
    with transaction(conn) as c:
        c.execute("ALTER TABLE cycles RENAME TO cycles_before_clocks")
        c.execute("CREATE TABLE cycles (clock TEXT NOT NULL DEFAULT '', decision_ts TEXT NOT NULL, status TEXT NOT "
                  "NULL, started_at TEXT NOT NULL, finished_at TEXT, PRIMARY KEY (clock, decision_ts))")
        c.execute("INSERT INTO cycles SELECT '', decision_ts, status, started_at, finished_at "
                  "FROM cycles_before_clocks")
        c.execute("DROP TABLE cycles_before_clocks")


def _intent(r) -> Intent:
    return Intent(r["client_order_id"], r["decision_ts"], r["strategy"], r["symbol"], r["side"], r["qty"],
                  r["type"], r["limit_price"], r["take_profit"], r["time_in_force"], r["status"],
                  r["broker_order_id"], r["error"], r["decision"], r["kind"], r["broker_status"], r["asset_class"],
                  r["cash_seen"], r["buying_power_seen"])


def decision_json(side: int, entry_limit: float | None, take_profit: float | None) -> str:
    return json.dumps({"side": side, "entry_limit": entry_limit, "take_profit": take_profit})
