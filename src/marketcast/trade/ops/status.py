"""What ``marketcast trade status`` shows, from the state folder alone (no broker call).

What must add up after kills (cycles, orders, fills) is counted from the journal, which commits every step
before the loop moves on; ``records.jsonl`` may hold a bar twice or miss one a kill cut short. The records add
what only they know: the venue and endpoint, equity, quotes, forecast latency, compile state, memory, the
warm-up, the foreign holdings the last cycle saw, and the symbols it held because the broker holds more of them
than the journal explains.

It only reads: the journal is opened read-only (no ``-wal``/``-shm`` created, nothing changed), so a state
folder the user may not write, or one a running loop is writing, can be shown.
"""

from __future__ import annotations

from pathlib import Path

from marketcast.errors import ConfigError
from marketcast.trade.ops.monitor import read_records, summarise
from marketcast.trade.journal.state import Journal
from marketcast.trade.ops.redact import redact

INTENT_STATUSES = ("submitted", "rejected", "refused", "abandoned", "lost", "pending")


def journal_counts(journal: Journal) -> dict:
    """Cycles done (and their first and last bar), orders by what became of them, fills and cancels."""
    c = journal.conn
    done, first, last = c.execute("SELECT COUNT(*), MIN(decision_ts), MAX(decision_ts) FROM cycles "
                                  "WHERE status='done'").fetchone()
    by_status = {r[0]: r[1] for r in c.execute("SELECT status, COUNT(*) FROM intents GROUP BY status").fetchall()}
    filled = c.execute("SELECT COUNT(DISTINCT client_order_id) FROM fills WHERE kind='entry'").fetchone()[0]
    fills = c.execute("SELECT COUNT(*) FROM fills").fetchone()[0]
    cancelled = c.execute("SELECT COUNT(*) FROM cancels WHERE status='done'").fetchone()[0]
    return {"cycles": done, "first_bar": first, "last_bar": last,
            **{f"orders_{s}": by_status.get(s, 0) for s in INTENT_STATUSES[:3]},
            "orders_filled": filled, "fills": fills, "orders_cancelled": cancelled,
            **{f"orders_{s}": by_status.get(s, 0) for s in INTENT_STATUSES[3:]}}


def _text(value) -> str:
    return f"{value:,.2f}" if isinstance(value, float) else str(value)


def status_rows(state_dir: Path) -> list[tuple[str, str]]:
    """(what, value) rows of the status table, redacted (a state folder written before redaction covered URLs
    may still hold an endpoint's userinfo or a broker error's URL)."""
    return [(what, redact(value)) for what, value in _rows(state_dir)]


def _rows(state_dir: Path) -> list[tuple[str, str]]:
    if state_dir.exists() and not state_dir.is_dir():
        raise ConfigError(f"--state-dir {state_dir} is a file, not a state folder; pass the folder of `trade run` "
                          f"or `trade replay` (the one holding journal.db)")
    records = read_records(state_dir)
    rows: list[tuple[str, str]] = []
    path = state_dir / "journal.db"
    journal = Journal(path, read_only=True) if path.exists() else None
    try:
        counts = journal_counts(journal) if journal is not None else {"cycles": 0}
        rows += [(k, _text(v)) for k, v in counts.items()]
        rows += [(k, _text(v)) for k, v in summarise(records).items()]
        if records and records[-1].get("foreign"):
            rows.append(("foreign (untouched)", "; ".join(
                f"{s}: position {f['position']:g}, orders {', '.join(f['orders']) or 'none'}"
                for s, f in records[-1]["foreign"].items())))
        if records and records[-1].get("unexpected"):  # a split or outside trade: the symbol is held
            rows.append(("held (broker holds more than the journal)", "\n".join(records[-1]["unexpected"].values())))
        if records and records[-1].get("chosen"):
            rows.append(("strategies (last bar)", "; ".join(
                f"{s}: {c['strategy']}{' pinned' if c.get('pinned') else ''}" + (
                    f" (return {c['return']:+.2%}, Sharpe {c['sharpe']:.2f})" if c.get("return") is not None else "")
                for s, c in records[-1]["chosen"].items())))
        if journal is None:
            return rows
        meta = journal.meta()
        if meta:
            rows.append(("bound to", f"account {meta.get('account_id')} at {meta.get('endpoint')}"))
        for i in [i for i in journal.intents() if i.status in ("refused", "rejected")][-3:]:
            rows.append((f"{i.status} {i.client_order_id}", f"{i.symbol} {i.decision_ts[:10]}: {i.error}"))
        halts = journal.halts.active()
        rows.append(("halted", "no" if not halts else "\n".join(h.message() for h in halts)))
        for h in halts:  # a risk halt keeps (or flattened) the loop's positions: each with its exits
            if h.positions():
                rows.append(("halt: positions and exits", "\n".join(h.positions())))
    finally:
        if journal is not None:
            journal.close()
    return rows
