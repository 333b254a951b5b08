"""The halted state, kept in the journal: while a halt is active the loop trades nothing.

A halt has a ``source`` (``reconcile``: the journal and the broker disagree; a risk limit can add its own),
a one-line ``reason``, the command that ``resolve``\\ s it, and ``details`` (JSON). It stays active until
something lifts it (``lifted_at``/``lifted_by``), so it survives restarts and shows in ``trade status``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from marketcast.trade.journal.db import transaction

SCHEMA = """
CREATE TABLE IF NOT EXISTS halts (
    id INTEGER PRIMARY KEY AUTOINCREMENT, source TEXT NOT NULL, reason TEXT NOT NULL, resolve TEXT NOT NULL,
    details TEXT, since TEXT NOT NULL, lifted_at TEXT, lifted_by TEXT);
"""


@dataclass(frozen=True)
class Halt:
    id: int
    source: str
    reason: str
    resolve: str
    since: str
    details: dict

    def message(self) -> str:
        return f"trading is halted since {self.since} ({self.source}): {self.reason}. To resolve: {self.resolve}"

    def positions(self) -> list[str]:
        """One line per position the halt lists with its exits (a risk halt's ``details["positions"]``)."""
        def one(e: dict) -> str:
            leg = f" (leg of {e['entry']})" if e.get("entry") else ""
            price = "" if e.get("limit_price") is None else f" @ {e['limit_price']:g}"
            return f"{e['client_order_id']}{leg} {e['side']} {e['qty']:g} {e['type']}{price} {e['status']}"

        out = []
        for p in self.details.get("positions", []):
            exits = p.get("exits", [])
            shown = exits if isinstance(exits, str) else ", ".join(one(e) for e in exits) or "none"
            out.append(f"{p['symbol']} {p['qty']:g}: {'flattened by' if self.details.get('flattened') else 'exits'} "
                       f"{shown}" + (f" ({p['note']})" if p.get("note") else ""))
        return out


class Halts:
    """The ``halts`` table of one journal connection."""

    def __init__(self, conn, now) -> None:
        self.conn, self.now = conn, now
        conn.executescript(SCHEMA)

    def add(self, source: str, reason: str, resolve: str, details: dict | None = None) -> Halt:
        """Record a halt (the active one with the same source and reason is kept, not repeated)."""
        with transaction(self.conn) as c:
            row = c.execute("SELECT * FROM halts WHERE lifted_at IS NULL AND source=? AND reason=?",
                            (source, reason)).fetchone()
            if row is None:
                c.execute("INSERT INTO halts (source, reason, resolve, details, since) VALUES (?,?,?,?,?)",
                          (source, reason, resolve, json.dumps(details or {}, default=str), self.now()))
        return next(h for h in self.active() if h.source == source and h.reason == reason)

    def active(self) -> list[Halt]:
        rows = self.conn.execute("SELECT * FROM halts WHERE lifted_at IS NULL ORDER BY id").fetchall()
        return [Halt(r["id"], r["source"], r["reason"], r["resolve"], r["since"], json.loads(r["details"] or "{}"))
                for r in rows]

    def update(self, halt_id: int, details: dict) -> None:
        """Replace an active halt's details: what its latest look found (positions, their exits)."""
        with transaction(self.conn) as c:
            c.execute("UPDATE halts SET details=? WHERE id=? AND lifted_at IS NULL",
                      (json.dumps(details, default=str), halt_id))

    def lift(self, source: str, by: str) -> int:
        """Lift every active halt of ``source``; returns how many."""
        with transaction(self.conn) as c:
            n = c.execute("SELECT COUNT(*) FROM halts WHERE lifted_at IS NULL AND source=?", (source,)).fetchone()[0]
            c.execute("UPDATE halts SET lifted_at=?, lifted_by=? WHERE lifted_at IS NULL AND source=?",
                      (self.now(), by, source))
        return n
