"""The live loop's verdict strip: the status page's first line, in the backtest strip's cells and colours.

Honest about what a state folder knows: the equity the broker reported at each cycle (its net change and its
deepest fall from a peak), the cycles done, the orders the broker rejected or the loop refused, the models that
fell back to eager, the halts, and whether each symbol's strategy at the last bar reads the forecast. It holds
no prices, so there is no buy & hold to beat: the net change and the drawdown carry no status (``info``) rather
than one against a benchmark the page does not have. Every figure is read from :func:`~marketcast.trade.ops.status.
status_data` (what ``trade status`` prints and ``--json`` writes), so the page and the terminal cannot differ.
The statuses follow :data:`THRESHOLDS` (docs/reports.md#the-status-pages-verdict states them).
"""

from __future__ import annotations

from marketcast.backtest.strategies import STRATEGIES
from marketcast.backtest.verdict import AMBER, GREEN, INFO, MISSING, RED, Cell

#: The status rules, as docs/reports.md#the-status-pages-verdict states them.
THRESHOLDS = {
    "net": "info: no benchmark on the status page",
    "max_dd": "info: no benchmark on the status page",
    "cycles": "info",
    "refusals": "green: none; amber: any order the broker rejected or the loop refused",
    "fallbacks": "green: no model fell back to eager; amber: some did (slower, same numbers)",
    "halted": "green: no halt; red: a halt is active (trade resume lifts it)",
    "picks": "green: every symbol's strategy reads the forecast; amber: some ignore it; red: all do",
}
NOTE = ("Statuses: halted red; rejected or refused orders and eager fallbacks amber; strategies that ignore the "
        "forecast amber (all of them: red). No prices in the state folder, so no buy &amp; hold: net and max DD "
        "carry no status.")


def build(data: dict) -> dict:
    """The strip's figures and statuses from ``trade status``'s data (:func:`status_data`): JSON-ready."""
    rec, journal = data["records"] or {}, data["journal"]
    first, last = rec.get("equity_first"), rec.get("equity_last")
    picks = {s: c["strategy"] for s, c in (data["strategies"] or {}).items()}
    blind = sorted(s for s, p in picks.items() if p in STRATEGIES and not STRATEGIES[p].reads_forecast)
    v = {
        "net_return": None if not first or last is None else last / first - 1,
        "equity_first": first, "equity_last": last, "max_drawdown": rec.get("max_drawdown"),
        "cycles": (journal or {}).get("cycles", 0), "first_bar": (journal or {}).get("first_bar"),
        "last_bar": (journal or {}).get("last_bar"),
        "refusals": None if journal is None else journal["orders_rejected"] + journal["orders_refused"],
        "fallbacks_to_eager": rec.get("fallbacks_to_eager"), "halts": len(data["halts"]),
        "picks": picks, "blind": blind,
    }
    status = {
        "net": INFO if v["net_return"] is not None else MISSING,
        "max_dd": INFO if v["max_drawdown"] is not None else MISSING,
        "cycles": INFO,
        "refusals": MISSING if v["refusals"] is None else GREEN if v["refusals"] == 0 else AMBER,
        "fallbacks": MISSING if v["fallbacks_to_eager"] is None else GREEN if v["fallbacks_to_eager"] == 0 else AMBER,
        "halted": RED if v["halts"] else GREEN,
        "picks": MISSING if not picks else GREEN if not blind else RED if len(blind) == len(picks) else AMBER,
    }
    return {**v, "status": status}


def drawdown_text(dd: float | None) -> str:
    """A drawdown (a negative fraction, the JSON's sign) as a percent, ``-2.31%`` (none: ``0.00%``, never
    ``-0.00%``)."""
    return "—" if dd is None else f"{dd:.2%}" if dd < 0 else f"{0.0:.2%}"


def compile_mode_text(mode: str | None) -> str:
    """The compile mode in the words the status page and the terminal share: the JSON's null (no model compiled,
    the baseline included) is ``eager``."""
    return mode or "eager"


def _money(x) -> str:
    return "—" if x is None else f"{x:,.2f}"


def cells(v: dict) -> list[Cell]:
    """The strip's cells, each linking to the page's section that shows it in full."""
    s = v["status"]
    net = "—" if v["net_return"] is None else (f"{v['net_return']:+.2%} ({_money(v['equity_first'])} → "
                                               f"{_money(v['equity_last'])})")
    cycles = f"{v['cycles']:,}" + ("" if not v["first_bar"] else f" ({v['first_bar'][:10]} → {v['last_bar'][:10]})")
    picks = "; ".join(f"{sym} {p}" + (" IGNORES THE FORECAST" if sym in v["blind"] else "")
                      for sym, p in v["picks"].items()) or "—"
    return [
        Cell("net", "net", "summary", net, s["net"]),
        Cell("max_dd", "max DD", "live-equity", drawdown_text(v["max_drawdown"]), s["max_dd"]),
        Cell("cycles", "cycles", "summary", cycles, s["cycles"]),
        Cell("refusals", "rejected/refused", "orders", "—" if v["refusals"] is None else str(v["refusals"]),
             s["refusals"]),
        Cell("fallbacks", "eager fallbacks", "health",
             "—" if v["fallbacks_to_eager"] is None else str(v["fallbacks_to_eager"]), s["fallbacks"]),
        Cell("halted", "halted", "summary", f"yes ({v['halts']})" if v["halts"] else "no", s["halted"]),
        Cell("picks", "strategies (last bar)", "positions", picks, s["picks"]),
    ]
