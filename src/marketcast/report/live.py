"""The live loop's status page: what ``trade status`` says, as one HTML page (Plotly from the shared file beside it).

Read from the state folder only, never from the broker: the cycle records (``records.jsonl``: equity,
positions, forecast latency, recompiles), the journal (``journal.db``: cycles and orders counted, open orders,
fills, halts, the bound account) and the alerts (``alerts.jsonl``, one JSON object a line, when the loop writes
them). The page is a snapshot; ``trade status --html`` writes it again.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from marketcast.backtest.verdict import strip_html
from marketcast.errors import ConfigError
from marketcast.report.charts import PALETTE, WALK_FORWARD_COLOUR, figure, line
from marketcast.report.page import chart, document, heading, paragraph, table
from marketcast.trade.ops import live_verdict
from marketcast.trade.ops.monitor import read_records, summarise
from marketcast.trade.ops.redact import redact
from marketcast.trade.journal.state import Journal
from marketcast.trade.ops.status import COSTS_COLUMN, COSTS_NOTE, journal_counts, status_data
from marketcast.trade.types import HELD_STATUSES, WORKING_STATUSES

PAGE_NAME = "status.html"
ALERTS = "alerts.jsonl"
RECENT = 25  # fills and alerts listed, newest first
OPEN_INTENTS = ("pending", "submitted")


@dataclass
class LiveState:
    """Everything the page shows, read once from a state folder."""

    state_dir: Path
    records: list[dict]
    meta: dict = field(default_factory=dict)
    open_orders: list[dict] = field(default_factory=list)
    fills: list[dict] = field(default_factory=list)
    halts: list[str] = field(default_factory=list)
    alerts: list[dict] = field(default_factory=list)
    counts: dict = field(default_factory=dict)  # cycles, orders and fills from the journal (they survive kills)
    has_journal: bool = False


def read_alerts(state_dir: Path) -> list[dict]:
    """The alerts in ``alerts.jsonl``, oldest first (a torn last line from a kill is skipped)."""
    path = state_dir / ALERTS
    if not path.exists():
        return []
    out = []
    for text in path.read_text(encoding="utf-8").splitlines():
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            continue
        out.append(value if isinstance(value, dict) else {"message": value})
    return out


def is_open(status: str, broker_status: str | None) -> bool:
    """A journal intent the broker may still fill: sent (or about to be) and not known to be finished."""
    return status in OPEN_INTENTS and (broker_status is None or broker_status in (*WORKING_STATUSES,
                                                                                   *HELD_STATUSES))


def read_state(state_dir: str | Path) -> LiveState:
    folder = Path(state_dir)
    if not folder.is_dir():
        raise ConfigError(f"{folder}: no such state dir; run `marketcast trade run` or `replay` first")
    state = LiveState(folder, read_records(folder), alerts=read_alerts(folder))
    if (folder / "journal.db").exists():
        journal = Journal(folder / "journal.db", read_only=True)  # a page of the state changes none of it
        try:
            state.has_journal = True
            state.meta = journal.meta()
            state.counts = journal_counts(journal)
            state.open_orders = [vars(i) for i in journal.intents() if is_open(i.status, i.broker_status)]
            state.fills = [vars(f) for f in journal.fills()[-RECENT:]][::-1]
            state.halts = [h.message() for h in journal.halts.active()]
        finally:
            journal.close()
    return state


def _times(records: list[dict]) -> pd.DatetimeIndex:
    return pd.DatetimeIndex(pd.to_datetime([r.get("decision_ts") for r in records], utc=True))


def date_axis(fig: go.Figure, times: pd.DatetimeIndex) -> go.Figure:
    """Label the x axis with the cycles' dates (with the time of day when they span under two days), titled,
    so it never reads as bare numbers."""
    span = times.max() - times.min() if len(times) else pd.Timedelta(0)
    fig.update_xaxes(type="date", title_text="decision bar (UTC)",
                     tickformat="%Y-%m-%d" if span >= pd.Timedelta(days=2) else "%Y-%m-%d %H:%M", nticks=8)
    return fig


def count_axis(top: float) -> dict:
    """A y axis of counts: whole-number ticks only (a count axis ticked at 0.2 printed "0 0 0 1 1 1")."""
    return {"tickmode": "linear", "tick0": 0, "dtick": max(1, math.ceil(top / 5)), "tickformat": ",d",
            "rangemode": "tozero"}


def equity_chart(records: list[dict]) -> go.Figure:
    fig = figure("equity at each cycle", "equity")
    equity = np.array([r.get("equity") or np.nan for r in records], dtype=np.float64)
    fig.add_trace(line(_times(records), equity, "equity", hovertemplate="%{y:,.2f}",
                       line={"color": WALK_FORWARD_COLOUR, "width": 2}))
    return date_axis(fig, _times(records))


def health_chart(records: list[dict]) -> go.Figure:
    """Forecast latency per model (ms, left) and the recompiles since the loop started (right)."""
    fig = figure("forecast latency and recompiles per cycle", "latency (ms)")
    times = _times(records)
    models = sorted({m for r in records for m in (r.get("forecast_latency_s") or {})})
    for k, model in enumerate(models):
        ms_ = [1000 * (r.get("forecast_latency_s") or {}).get(model, np.nan) for r in records]
        fig.add_trace(line(times, ms_, f"{model} latency", hovertemplate="%{y:.1f} ms",
                           line={"color": PALETTE[k % len(PALETTE)], "width": 1.5}))
    recompiles = [r.get("recompiles_since_start", 0) for r in records]
    fig.add_trace(line(times, recompiles, "recompiles since start", yaxis="y2", hovertemplate="%{y:d}",
                       line={"color": "#555555", "width": 1.5, "shape": "hv", "dash": "dot"}))
    fig.update_layout(yaxis2={"title": {"text": "recompiles"}, "overlaying": "y", "side": "right",
                              "showgrid": False, **count_axis(max(recompiles, default=0) or 1)})
    return date_axis(fig, times)


def _money(v) -> str:
    return "—" if v is None else f"{v:,.2f}"


def _summary_rows(state: LiveState) -> list[list[str]]:
    s = {**summarise(state.records), **state.counts}
    if not state.records or not state.counts:
        return [["cycles", "0"]]
    first, last = s.get("equity_first"), s.get("equity_last")
    change = f" ({last / first - 1:+.2%})" if first and last else ""
    latency = ", ".join(f"{m} {v:,.1f} ms" for m, v in s["mean_forecast_latency_ms"].items()) or "—"
    return [["mode", f"{s['mode']} via {s['broker']} ({s['endpoint']})"],
            ["bound to", f"account {state.meta.get('account_id')} at {state.meta.get('endpoint')}" if state.meta
             else "—"],
            ["cycles", f"{s['cycles']:,} from {s['first_bar']} to {s['last_bar']}"],
            ["equity", f"{_money(first)} → {_money(last)}{change}"],
            ["orders", f"{s['orders_submitted']} submitted, {s['orders_filled']} filled, {s['orders_cancelled']} "
                       f"cancelled, {s['orders_rejected']} rejected, {s['orders_refused']} refused"],
            ["quotes", f"{s['quotes_real']} real, {s['quotes_synthetic']} synthetic"],
            ["mean forecast latency", latency],
            ["compile", f"mode {live_verdict.compile_mode_text(s['compile_mode'])}, {s['recompiles_since_start']} "
                        f"recompiles since start, {s['fallbacks_to_eager']} eager fallbacks "
                        f"{s['eager_fallback_models'] or ''}".rstrip()],
            ["peak memory", f"{s['peak_memory_mb']:,.0f} MB"],
            ["halted", "no" if not state.halts else "yes"]]


def _alert_row(a: dict) -> list[str]:
    when = next((a[k] for k in ("at", "time", "ts", "written_at") if k in a), "")
    kind = next((a[k] for k in ("kind", "name", "alert", "type") if k in a), "")
    level = next((a[k] for k in ("level", "severity") if k in a), "")
    message = next((a[k] for k in ("message", "text", "reason") if k in a), "")
    shown = {"at", "time", "ts", "written_at", "kind", "name", "alert", "type", "level", "severity", "message",
             "text", "reason"}
    rest = {k: v for k, v in a.items() if k not in shown}
    return [redact(x) for x in (when, level, kind, message, json.dumps(rest, default=str) if rest else "")]


def headline(v: dict) -> str:
    """The one line that answers first: the equity's net change over the cycles and its deepest fall (the
    strip's figures, :mod:`marketcast.trade.ops.live_verdict`)."""
    if v["net_return"] is None:
        return '<p class="headline" data-check="headline">No equity recorded yet.</p>'
    span = f", {v['first_bar'][:10]} → {v['last_bar'][:10]}" if v["first_bar"] else ""
    dd = "" if v["max_drawdown"] is None else f" · max DD <b>{live_verdict.drawdown_text(v['max_drawdown'])}</b>"
    return (f'<p class="headline" data-check="headline"><b>Equity {v["net_return"]:+.2%}</b> '
            f"({_money(v['equity_first'])} → {_money(v['equity_last'])}) over {v['cycles']:,} cycles{span}{dd}</p>")


def status_html(state: LiveState) -> str:
    last = state.records[-1] if state.records else {}
    verdict = live_verdict.build(status_data(state.state_dir))
    summary = [[what, redact(value)] for what, value in _summary_rows(state)]  # endpoints may be older than redaction
    parts = [strip_html([("live loop", live_verdict.cells(verdict))], note=live_verdict.NOTE), headline(verdict)]
    summary_table = heading("summary", "Summary") + table(["", ""], summary, text=True)
    if state.records:  # the equity chart beside the summary, so both are on the first screen
        parts.append('<div class="hero">' + chart("live-equity", equity_chart(state.records),
                                                  "Account equity the broker reported at each cycle's decision bar.")
                     + f'<aside class="trust">{summary_table}</aside></div>')
    else:
        parts.append(summary_table)
    parts += [paragraph(redact(h), "warning") for h in state.halts]
    positions = [[s, f"{q:g}", (last.get("strategies") or {}).get(s, "")] for s, q in (last.get("positions") or {}).items()]
    parts += [heading("positions", "Positions"),
              table(["symbol", "quantity", "strategy picked"], positions) if positions
              else paragraph("no positions at the last cycle", "empty")]
    for s, f in (last.get("foreign") or {}).items():
        parts.append(paragraph(f"{s}: foreign position {f['position']:g} and orders "
                               f"{', '.join(f['orders']) or 'none'} (not the loop's; left untouched)"))
    orders = [[o["client_order_id"], o["symbol"], o["side"], f"{o['qty']:g}", o["type"], _money(o["limit_price"]),
               _money(o["take_profit"]), o["time_in_force"], o["status"], o["broker_status"] or "—", o["decision_ts"]]
              for o in state.open_orders]
    parts += [heading("orders", "Open orders"),
              table(["client order id", "symbol", "side", "qty", "type", "limit", "take profit", "tif", "journal",
                     "broker", "decision bar"], orders) if orders else
              paragraph("no open orders" if state.has_journal else "no journal.db in the state folder", "empty")]
    fills = [[f["timestamp"], f["symbol"], f["side"], f"{f['qty']:g}", _money(f["price"]), _money(f["fee"]), f["kind"],
              f["client_order_id"]] for f in state.fills]
    parts += [heading("fills", f"Recent fills (last {RECENT}, newest first)"),
              table(["time", "symbol", "side", "qty", "price", COSTS_COLUMN, "kind", "client order id"], fills) if fills
              else paragraph("no fills yet", "empty")]
    if fills:
        parts.append(paragraph(f"{COSTS_COLUMN}: {COSTS_NOTE}."))
    alerts = [_alert_row(a) for a in state.alerts[-RECENT:][::-1]]
    parts += [heading("alerts", f"Alerts (last {RECENT}, newest first)"),
              table(["time", "level", "kind", "message", "details"], alerts, text=True) if alerts else
              paragraph("no alerts", "empty")]
    if state.records:
        parts += [heading("health", "Model health"),
                  chart("live-health", health_chart(state.records),
                        "Forecast latency of each model per cycle and the torch.compile recompiles counted since the "
                        "loop started (a rising count after warm-up means shapes keep changing).")]
    nav = [(a, a) for a in ("summary", "positions", "orders", "fills", "alerts")] + (
        [("health", "model health")] if state.records else [])
    subtitle = (f"State folder {state.state_dir}; last cycle {last.get('decision_ts', '—')}, record written "
                f"{last.get('written_at', '—')}.")
    return document("marketcast trade status", subtitle, nav, "".join(parts))
