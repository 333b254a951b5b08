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

from marketcast.backtest.costs import defaults_text
from marketcast.errors import ConfigError
from marketcast.trade.ops.live_verdict import compile_mode_text, drawdown_text
from marketcast.trade.ops.monitor import RECORDS, read_records, summarise
from marketcast.trade.journal.state import Journal
from marketcast.trade.ops.redact import redact

INTENT_STATUSES = ("submitted", "rejected", "refused", "abandoned", "lost", "pending")


# a fill's journalled fee is all the paper broker charged on it (its Costs.per_side), not the broker's fee alone
COSTS_COLUMN = "costs (fee+spread+slippage)"
COSTS_NOTE = (f"per side, fee + half-spread + slippage (a short's exit adds its borrow); the paper broker's "
              f"defaults: {defaults_text()}; a --fee replaces the fee part")

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
    """A status value for people: numbers with separators, a mapping as ``KEY value`` pairs, a list joined,
    nothing as ``-`` (never a Python repr)."""
    if value is None or value == {} or value == []:
        return "-"
    if isinstance(value, dict):
        return "; ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {_text(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_text(v) for v in value)
    return f"{value:,.2f}" if isinstance(value, float) else str(value)


def _redacted(value):
    """``value`` with every string in it redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


def _not_a_file(state_dir: Path) -> None:
    if state_dir.exists() and not state_dir.is_dir():
        raise ConfigError(f"--state-dir {state_dir} is a file, not a state folder; pass the folder of `trade run` "
                          f"or `trade replay` (the one holding journal.db)")


def check_state_folder(state_dir: Path) -> None:
    """One line unless ``state_dir`` is a folder holding a journal.db or a records.jsonl (what `trade run` and
    `trade replay` write first): an empty folder or ``/proc/self`` used to show a status of 0 cycles, exit 0."""
    _not_a_file(state_dir)
    if not state_dir.is_dir():
        raise ConfigError(f"{state_dir}: no such state dir; run `marketcast trade run` or `replay` first")
    if not any((state_dir / name).is_file() for name in ("journal.db", RECORDS)):
        raise ConfigError(f"{state_dir}: no journal.db or {RECORDS}, not a state folder of `trade run` or "
                          f"`trade replay`")


def status_data(state_dir: Path) -> dict:
    """What ``trade status`` shows, in JSON types and redacted (a state folder written before redaction covered
    URLs may still hold an endpoint's userinfo or a broker error's URL); ``journal`` is null without a
    journal.db, ``records`` null without records. src/marketcast/schemas/trade_status.schema.json is its shape."""
    _not_a_file(state_dir)
    records = read_records(state_dir)
    last = records[-1] if records else {}
    data = {"state_dir": str(state_dir), "journal": None, "records": summarise(records) or None,
            "foreign": last.get("foreign") or {}, "held": last.get("unexpected") or {},
            "strategies": last.get("chosen") or {}, "bound_to": None, "refused": [], "halts": [],
            "shadow": None}
    path = state_dir / "journal.db"
    if path.exists():
        journal = Journal(path, read_only=True)
        try:
            data["journal"] = journal_counts(journal)
            meta = journal.meta()
            if meta:
                data["bound_to"] = {"account_id": meta.get("account_id"), "endpoint": meta.get("endpoint")}
            data["refused"] = [{"client_order_id": i.client_order_id, "status": i.status, "symbol": i.symbol,
                                "decision_ts": i.decision_ts, "error": i.error}
                               for i in journal.intents() if i.status in ("refused", "rejected")][-3:]
            data["halts"] = [{"message": h.message(), "positions": h.positions()} for h in journal.halts.active()]
            data["shadow"] = shadow_summary(journal)
        finally:
            journal.close()
    return _redacted(data)


def shadow_summary(journal: Journal) -> dict | None:
    """The shadow against the live model on the same settled bars (:mod:`marketcast.trade.journal.shadow`): paper
    P&L, and the skill (quantile CRPS) and calibration (80% coverage) of both models' next-close forecasts; the
    bars the shadow failed on. None when no shadow ran."""
    from marketcast.trade.journal.shadow import active_weights, compare, errors, shadow_model, shadow_weights, skill

    weights, failed = shadow_weights(journal), errors(journal)
    if weights is None and failed is None:
        return None
    r, k = compare(journal), skill(journal)
    num = lambda x: None if x != x else x  # noqa: E731 - NaN (nothing to score yet) as null
    return {"weights": weights or failed["model"], "model": shadow_model(journal), "active": active_weights(journal),
            "decisions": r.n, "shadow_pnl": r.shadow_pnl, "live_pnl": r.live_pnl, "mean_diff": r.mean_diff,
            "p": num(r.p), "scored": k.n, "shadow_crps": num(k.shadow_crps), "live_crps": num(k.live_crps),
            "shadow_coverage_80": num(k.shadow_coverage), "live_coverage_80": num(k.live_coverage),
            "crps_p": num(k.p), "errors": failed}


def status_rows(state_dir: Path) -> list[tuple[str, str]]:
    """(what, value) rows of the status table, from :func:`status_data`."""
    data = status_data(state_dir)
    rows = [(k, _text(v)) for k, v in (data["journal"] or {"cycles": 0}).items()]
    said = {"max_drawdown": drawdown_text, "compile_mode": compile_mode_text}  # in the status page's words
    rows += [(k, said.get(k, _text)(v)) for k, v in (data["records"] or {}).items()]
    if data["foreign"]:
        rows.append(("foreign (untouched)", "; ".join(
            f"{s}: position {f['position']:g}, orders {', '.join(f['orders']) or 'none'}"
            for s, f in data["foreign"].items())))
    if data["held"]:  # a split or outside trade: the symbol is held
        rows.append(("held (broker holds more than the journal)", "\n".join(data["held"].values())))
    if data["strategies"]:
        rows.append(("strategies (last bar)", "; ".join(
            f"{s}: {c['strategy']}{' pinned' if c.get('pinned') else ''}" + (
                f" (return {c['return']:+.2%}, Sharpe {c['sharpe']:.2f})" if c.get("return") is not None else "")
            for s, c in data["strategies"].items())))
    if data["journal"] is None:
        return rows
    if data["bound_to"]:
        rows.append(("bound to", f"account {data['bound_to']['account_id']} at {data['bound_to']['endpoint']}"))
    for i in data["refused"]:
        rows.append((f"{i['status']} {i['client_order_id']}",
                     f"{i['symbol']} {i['decision_ts'][:10]}: {_text(i['error'])}"))
    if data["shadow"]:
        sh = data["shadow"]
        rows.append((f"shadow {sh['weights']}", f"{sh['decisions']} settled decisions: paper P&L "
                     f"{sh['shadow_pnl']:+.4%} vs live {sh['live_pnl']:+.4%} on the same bars, p="
                     + ("-" if sh["p"] is None else f"{sh['p']:.4g}")))
        if sh["scored"]:
            rows.append(("shadow skill and calibration", (
                f"CRPS {sh['shadow_crps']:.6f} vs live {sh['live_crps']:.6f} (lower is better, p="
                + ("-" if sh["crps_p"] is None else f"{sh['crps_p']:.4g}") + "); 80% interval coverage "
                f"{sh['shadow_coverage_80']:.1%} vs live {sh['live_coverage_80']:.1%}; on {sh['scored']} settled bars")))
        if sh["errors"]:
            e = sh["errors"]
            rows.append(("shadow errors", f"{e['bars']} bar(s) failed, the live loop went on; last {e['symbol']} "
                                          f"{e['last_bar'][:10]}: {e['error']}"))
    rows.append((COSTS_COLUMN, COSTS_NOTE))
    halts = data["halts"]
    rows.append(("halted", "no" if not halts else "\n".join(h["message"] for h in halts)))
    for h in halts:  # a risk halt keeps (or flattened) the loop's positions: each with its exits
        if h["positions"]:
            rows.append(("halt: positions and exits", "\n".join(h["positions"])))
    return rows
