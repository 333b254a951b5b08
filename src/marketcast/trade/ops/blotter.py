"""``marketcast trade orders``: every order the loop recorded, one row each, from the journal alone.

The journal writes an intent before its POST (with the asset class and the account figures its check saw),
each POST in ``submissions`` and each fill in ``fills``, so a state folder of ``trade run`` or ``trade replay``
can be audited without the broker: what was sent, when, against how much cash, and what came of it. Refused
and never-sent orders are listed too, with their status (``submitted_at`` empty). docs/trading.md documents
every column.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import pandas as pd
from rich.table import Table

from marketcast.errors import ConfigError, StateError
from marketcast.fileio import refuse_special, write_atomic
from marketcast.trade.journal.files import check_state_files, outside_state
from marketcast.trade.journal.state import Journal, check_journal

COLUMNS = (
    "client_order_id", "symbol", "asset_class", "side", "type", "qty", "limit_price", "stop_price", "take_profit",
    "time_in_force", "kind", "strategy", "decision_ts", "submitted_at", "status", "broker_status", "filled_qty",
    "avg_fill_price", "filled_at", "exit_filled_qty", "exit_avg_price", "exit_filled_at", "cash_seen",
    "buying_power_seen", "error", "wall_clock_at",
)


def check_csv(path: Path | None, state_dir: Path) -> None:
    """``--csv`` outside the state folder (one line, exit 2, before anything is opened): a blotter written over
    ``journal.db`` would destroy what it lists; and not a FIFO or a device (exit 3), which the write would
    replace with a regular file."""
    if path is not None:
        refuse_special(outside_state(path, state_dir, "--csv"), "--csv")


def open_journal(state_dir: Path) -> Journal:
    """The journal of ``state_dir``; a missing folder or journal is exit 2, a journal that is a folder, a FIFO, a
    device or a file that is no journal exit 3 (checked read-only first,
    :func:`~marketcast.trade.journal.state.check_journal`, so a stray database is never given the journal's
    tables)."""
    check_state_files(state_dir)
    if state_dir.exists() and not state_dir.is_dir():
        raise ConfigError(f"--state-dir {state_dir} is a file, not a state folder; pass the folder of `trade run` "
                          "or `trade replay` (the one holding journal.db)")
    if not state_dir.is_dir():
        raise ConfigError(f"{state_dir}: no such state folder; pass the --state-dir of `trade run` or `trade replay`")
    path = state_dir / "journal.db"
    if not path.is_file():
        raise ConfigError(f"{state_dir}: no journal.db, not a state folder of `trade run` or `trade replay`")
    if check_journal(path):  # read-only: a file that is not a journal is refused untouched
        raise StateError(f"{path}: an empty file, not a marketcast journal; pass the --state-dir of `trade run` or "
                         f"`trade replay`")
    return Journal(path)


def _sum(fills: list[tuple[float, float, str]]) -> tuple[float, float | None, str | None]:
    """(quantity, average price, last time) of some fills; times compared as times, not text."""
    qty = sum(q for q, _, _ in fills)
    if not fills or qty <= 0:
        return 0.0, None, None
    last = max(fills, key=lambda f: pd.Timestamp(f[2]))[2]
    return qty, sum(q * p for q, p, _ in fills) / qty, last


def rows(journal: Journal) -> list[dict]:
    """One dict per intent (keys: :data:`COLUMNS`), by decision bar then recording order. A fill of the
    order's own role is its fill; one of another role under the same id (the take-profit leg a broker attached
    to an entry, or the paper broker's close at the bar's end) is its exit."""
    c = journal.conn
    first_post = {r[0]: (r[1], r[2]) for r in c.execute("SELECT client_order_id, MIN(at), MIN(COALESCE(wall_at, at)) "
                                                        "FROM submissions GROUP BY client_order_id")}
    fills: dict[str, list] = {}
    for r in c.execute("SELECT client_order_id, kind, qty, price, ts FROM fills ORDER BY ts, fill_id"):
        fills.setdefault(r[0], []).append((r[1], float(r[2]), float(r[3]), r[4]))
    out = []
    for i in c.execute("SELECT * FROM intents ORDER BY decision_ts, created_at, client_order_id"):
        mine = fills.get(i["client_order_id"], [])
        filled = _sum([(q, p, t) for k, q, p, t in mine if k == i["kind"]])
        exited = _sum([(q, p, t) for k, q, p, t in mine if k != i["kind"]])
        out.append({
            "client_order_id": i["client_order_id"], "symbol": i["symbol"], "asset_class": i["asset_class"],
            "side": i["side"], "type": i["type"], "qty": i["qty"], "limit_price": i["limit_price"],
            "stop_price": None, "take_profit": i["take_profit"], "time_in_force": i["time_in_force"],
            "kind": i["kind"], "strategy": i["strategy"], "decision_ts": i["decision_ts"],
            "submitted_at": first_post.get(i["client_order_id"], (None,))[0], "status": i["status"],
            "broker_status": i["broker_status"], "filled_qty": filled[0], "avg_fill_price": filled[1],
            "filled_at": filled[2], "exit_filled_qty": exited[0], "exit_avg_price": exited[1],
            "exit_filled_at": exited[2], "cash_seen": i["cash_seen"], "buying_power_seen": i["buying_power_seen"],
            "error": i["error"], "wall_clock_at": first_post.get(i["client_order_id"], (None, None))[1],
        })
    return out


def counts(orders: list[dict]) -> tuple[int, int]:
    """(orders, filled) as the blotter counts them: its rows (every order the loop journalled: entries, closes,
    take-profits, top-ups, refused ones too; a bracket's leg is its entry's exit, not a row), and the rows with a
    fill of their own. ``trade orders`` and the replay's summary both print these."""
    return len(orders), sum(1 for o in orders if o["filled_qty"] > 0)


def to_csv(orders: list[dict]) -> str:
    """Header :data:`COLUMNS`; None is an empty field, numbers as Python writes them (round-trip exact)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(orders)
    return buf.getvalue()


def write_csv(path: Path, orders: list[dict]) -> Path:
    """Atomically (a reader never sees half a file; a failure leaves no file), created ``0600``."""
    if path.is_dir():
        raise ConfigError(f"--csv {path} is a folder; give a file name, e.g. {path / 'orders.csv'}")
    text = to_csv(orders)

    def write(tmp: Path) -> None:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8",
                       newline="") as fh:
            fh.write(text)

    return write_atomic(path, write, StateError)


def _num(value, spec: str = "g") -> str:
    return "" if value is None else format(value, spec)


def table(orders: list[dict], title: str) -> Table:
    """The columns that fit a terminal; ``--json`` and ``--csv`` have them all."""
    t = Table(title=title)
    for name in ("decision", "client_order_id", "symbol", "kind", "side", "type", "qty", "limit", "submitted",
                 "status", "filled", "avg price", "cash seen", "buying power seen", "error"):
        t.add_column(name, justify="right" if name in ("qty", "limit", "filled", "avg price", "cash seen",
                                                       "buying power seen") else "left")
    for o in orders:
        status = o["status"] + (f" ({o['broker_status']})" if o["broker_status"] else "")
        t.add_row(o["decision_ts"][:16], o["client_order_id"], o["symbol"], o["kind"], o["side"], o["type"],
                  _num(o["qty"]), _num(o["limit_price"], ".10g"), (o["submitted_at"] or "")[:19], status,
                  _num(o["filled_qty"]), _num(o["avg_fill_price"], ".10g"), _num(o["cash_seen"], ",.2f"),
                  _num(o["buying_power_seen"], ",.2f"), o["error"] or "")
    return t
