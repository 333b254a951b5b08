"""The loop's journal: what it intended, what the broker answered, which cycles finished.

Write-ahead: an intent row (status ``pending``) is committed *before* the broker call and updated
(``submitted``/``rejected``) in a second transaction after it. A kill between the two leaves a pending
intent that :meth:`Journal.pending` hands to reconciliation, which asks the broker by ``client_order_id``
instead of guessing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from marketcast.trade.db import connect, transaction
from marketcast.trade.types import Fill

SCHEMA = """
CREATE TABLE IF NOT EXISTS intents (
    client_order_id TEXT PRIMARY KEY, decision_ts TEXT NOT NULL, strategy TEXT NOT NULL,
    symbol TEXT NOT NULL, side TEXT NOT NULL, qty REAL NOT NULL, type TEXT NOT NULL,
    limit_price REAL, take_profit REAL, time_in_force TEXT NOT NULL, status TEXT NOT NULL,
    broker_order_id TEXT, error TEXT, attempts INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL, decision TEXT);
CREATE TABLE IF NOT EXISTS fills (
    fill_id TEXT PRIMARY KEY, client_order_id TEXT NOT NULL, symbol TEXT NOT NULL, side TEXT NOT NULL,
    qty REAL NOT NULL, price REAL NOT NULL, fee REAL NOT NULL, ts TEXT NOT NULL, kind TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cycles (
    decision_ts TEXT PRIMARY KEY, status TEXT NOT NULL, started_at TEXT NOT NULL, finished_at TEXT);
CREATE TABLE IF NOT EXISTS submissions (
    n INTEGER PRIMARY KEY AUTOINCREMENT, client_order_id TEXT NOT NULL, at TEXT NOT NULL);
"""


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


class Journal:
    """SQLite journal in ``state_dir/journal.db``."""

    def __init__(self, path: str | Path) -> None:
        self.conn = connect(path)
        self.conn.executescript(SCHEMA)

    # -------------------------------------------------------------- cycles
    def cycle_done(self, decision_ts: str) -> bool:
        r = self.conn.execute("SELECT status FROM cycles WHERE decision_ts=?", (decision_ts,)).fetchone()
        return bool(r) and r[0] == "done"

    def start_cycle(self, decision_ts: str) -> None:
        with transaction(self.conn) as c:
            c.execute("INSERT OR IGNORE INTO cycles VALUES (?, 'started', ?, NULL)", (decision_ts, now()))

    def finish_cycle(self, decision_ts: str) -> None:
        with transaction(self.conn) as c:
            c.execute("UPDATE cycles SET status='done', finished_at=? WHERE decision_ts=?", (now(), decision_ts))

    def last_done_cycle(self) -> str | None:
        r = self.conn.execute("SELECT MAX(decision_ts) FROM cycles WHERE status='done'").fetchone()
        return r[0]

    # -------------------------------------------------------------- intents
    def intent(self, client_order_id: str) -> Intent | None:
        r = self.conn.execute("SELECT * FROM intents WHERE client_order_id=?", (client_order_id,)).fetchone()
        return _intent(r) if r else None

    def record_intent(self, intent: Intent) -> Intent:
        """Insert a pending intent (no-op if the id exists); returns the stored row."""
        t = now()
        with transaction(self.conn) as c:
            c.execute(
                "INSERT OR IGNORE INTO intents VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,0,?,?,?)",
                (intent.client_order_id, intent.decision_ts, intent.strategy, intent.symbol, intent.side,
                 intent.qty, intent.type, intent.limit_price, intent.take_profit, intent.time_in_force,
                 "pending", None, None, t, t, intent.decision),
            )
        return self.intent(intent.client_order_id)

    def mark_attempt(self, client_order_id: str) -> None:
        """Counted before the broker call: ``submissions`` lists every POST the loop ever made."""
        with transaction(self.conn) as c:
            c.execute("UPDATE intents SET attempts = attempts + 1, updated_at=? WHERE client_order_id=?",
                      (now(), client_order_id))
            c.execute("INSERT INTO submissions (client_order_id, at) VALUES (?, ?)", (client_order_id, now()))

    def mark(self, client_order_id: str, status: str, broker_order_id: str | None = None,
             error: str | None = None) -> None:
        with transaction(self.conn) as c:
            c.execute(
                "UPDATE intents SET status=?, broker_order_id=COALESCE(?, broker_order_id), error=?, updated_at=? "
                "WHERE client_order_id=?",
                (status, broker_order_id, error, now(), client_order_id),
            )

    def pending(self) -> list[Intent]:
        return [_intent(r) for r in self.conn.execute("SELECT * FROM intents WHERE status='pending'")]

    def intents(self) -> list[Intent]:
        return [_intent(r) for r in self.conn.execute("SELECT * FROM intents ORDER BY decision_ts, symbol")]

    # -------------------------------------------------------------- fills
    def add_fills(self, fills: list[Fill]) -> int:
        """Store fills not seen before; returns how many orders got a new entry fill."""
        with transaction(self.conn) as c:
            before = c.execute("SELECT COUNT(*) FROM fills WHERE kind='entry'").fetchone()[0]
            c.executemany(
                "INSERT OR IGNORE INTO fills VALUES (?,?,?,?,?,?,?,?,?)",
                [(f.fill_id, f.client_order_id, f.symbol, f.side, f.qty, f.price, f.fee, f.timestamp, f.kind)
                 for f in fills],
            )
            after = c.execute("SELECT COUNT(*) FROM fills WHERE kind='entry'").fetchone()[0]
        return after - before

    def fills(self) -> list[Fill]:
        rows = self.conn.execute("SELECT * FROM fills ORDER BY ts, fill_id").fetchall()
        return [Fill(r["fill_id"], r["client_order_id"], r["symbol"], r["side"], r["qty"], r["price"], r["fee"],
                     r["ts"], r["kind"]) for r in rows]

    def last_fill_ts(self) -> str | None:
        return self.conn.execute("SELECT MAX(ts) FROM fills").fetchone()[0]

    def submission_counts(self) -> dict[str, int]:
        rows = self.conn.execute("SELECT client_order_id, COUNT(*) FROM submissions GROUP BY client_order_id")
        return {r[0]: r[1] for r in rows}

    def close(self) -> None:
        self.conn.close()


def _intent(r) -> Intent:
    return Intent(r["client_order_id"], r["decision_ts"], r["strategy"], r["symbol"], r["side"], r["qty"],
                  r["type"], r["limit_price"], r["take_profit"], r["time_in_force"], r["status"],
                  r["broker_order_id"], r["error"], r["decision"])


def decision_json(side: int, entry_limit: float | None, take_profit: float | None) -> str:
    return json.dumps({"side": side, "entry_limit": entry_limit, "take_profit": take_profit})
