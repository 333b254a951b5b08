"""What a symbol's section says first: one headline line, the provenance ("trust") box, then the metrics
table at quantstats' breadth, the drawdown periods and the walk-forward trade list.

Nothing is computed here: the numbers are the backtest's (:mod:`marketcast.backtest.metrics`,
:mod:`marketcast.backtest.breadth`, :mod:`marketcast.backtest.overfit`), this module only words and formats
them. Drawdowns are negative, as in quantstats and every other output.
"""

from __future__ import annotations

from marketcast.backtest.breadth import Breadth, breadth
from marketcast.backtest.engine import SymbolResult
from marketcast.backtest.metrics import UNDER_A_YEAR
from marketcast.backtest.returns import STRATEGY
from marketcast.forecast.cards import pretraining_text, provenance_text
from marketcast.forecast.tuning import IN_SAMPLE, sample_text
from marketcast.backtest.tables import annual, interval, level, num, pct, selection_verdict, under_a_year
from marketcast.report.page import esc, sortable_table, table
from marketcast.report.series import walk_forward_trades

TOP_DRAWDOWNS = 10


def share(x) -> str:
    """An unsigned percentage (volatility, a rate, a share)."""
    return "—" if x is None else f"{100 * x:.2f}%"


def count(x) -> str:
    return "—" if x is None else f"{x:,}"


def breadth_of(result: SymbolResult) -> dict[str, Breadth]:
    """The walk-forward record's and buy and hold's :class:`Breadth` (the section computes it once and hands
    it to each table)."""
    p, t = result.periods_per_year, result.settle_times
    return {"walk-forward": breadth(result.walk_forward["returns"], t, p),
            "buy & hold": breadth(result.benchmark.returns, t, p)}


def weights_of(meta: dict) -> tuple[str, bool]:
    """Which weights made the forecasts, and whether they are random (a plumbing run, not a model's result).
    Toto names its checkpoint in ``source`` ("random(seed=0)" when random), Kronos in its model label
    ("kronos-small-random"); the baseline has no learned weights."""
    model = str(meta.get("model", "?"))
    source = meta.get("source") or meta.get("weights")
    random = "random" in model.lower() or "random" in str(source or "").lower()
    if source:
        text = f"{model}, weights {source}"
    elif model == "baseline":
        text = "baseline: no learned weights (a statistical forecast from the context)"
    else:
        text = model
    return text, random


def headline(result: SymbolResult, key: str) -> str:
    """The one line that answers first: walk-forward return, Sharpe with its interval, max drawdown, against
    buy and hold, and the walk-forward rule's PSR against 0 and DSR over the rules tried where known."""
    wf, bh = result.walk_forward["metrics"], result.benchmark.metrics
    ci = interval(wf)
    ci = f"{level(result)} {ci}" if ci.startswith("[") else f"(no CI: {ci})"
    vs = 100 * (wf["return"] - bh["return"])
    parts = [f"<b>Walk-forward {esc(pct(wf['return']))}</b> over {result.windows:,} windows "
             f"(annual {esc(annual(wf))})",
             f"Sharpe <b>{esc(num(wf['sharpe']))}</b> {esc(ci)}",
             f"max DD <b>{esc(pct(-wf['max_drawdown'] or 0.0))}</b>",
             f"vs buy &amp; hold <b>{vs:+.2f} pts</b> (buy &amp; hold {esc(pct(bh['return']))}, max DD "
             f"{esc(pct(-bh['max_drawdown'] or 0.0))})"]
    o = result.overfit
    if o.psr_walk_forward is not None:  # one pre-declared rule: its PSR against 0, its DSR over the rules tried
        rules = f"{o.walk_forward_rules} selection rule{'s' if o.walk_forward_rules != 1 else ''}"
        parts.append(f"PSR {o.psr_walk_forward:.2f} (walk-forward, against 0), DSR {num(o.dsr_walk_forward, '{:.2f}')} "
                     f"over {rules}")
    return f'<p class="headline" id="{esc(key)}-headline" data-check="headline">{" · ".join(parts)}</p>'


def warnings_of(result: SymbolResult) -> list[str]:
    """What the reader should know before trusting a number."""
    out = list(result.annualisation.warnings) + ([result.context_warning] if result.context_warning else [])
    if result.forecast_meta.get("sample") == IN_SAMPLE:  # tuned --weights scored on bars they were tuned on
        out.append(sample_text(result.forecast_meta, result.windows))
    if provenance_text(result.forecast_meta):  # weights neither a known checkpoint nor tuned
        out.append(provenance_text(result.forecast_meta))
    if pretraining_text(result.forecast_meta, result.windows):  # a public checkpoint's pretraining period
        out.append(pretraining_text(result.forecast_meta, result.windows))
    if under_a_year(result):
        out.append(f"annual figures {UNDER_A_YEAR}: {result.windows:,} bars, {result.periods_per_year:,g} a year")
    verdict = selection_verdict(result)
    if verdict:
        out.append(verdict)
    trades, need = result.walk_forward["metrics"]["trades"], result.config.selection.min_trades
    if trades < need:
        out.append(f"the walk-forward record has {trades} trades, fewer than the {need} a Sharpe interval needs")
    return out


def trust_box(result: SymbolResult) -> str:
    """Costs, weights, windows, period, asset class and warnings: what produced the numbers beside it."""
    cfg, a = result.config, result.annualisation
    weights, random = weights_of(result.forecast_meta)
    banner = ('<p class="banner" data-check="random-weights">RANDOM WEIGHTS: these forecasts are noise; the '
              "numbers test the plumbing, not a model.</p>" if random else "")
    warnings = warnings_of(result)
    items = [
        ("Costs", result.costs.note()),
        ("Model weights", weights),
        *([("Sample", sample_text(result.forecast_meta, result.windows))]
          if result.forecast_meta.get("sample") else []),
        ("Windows", f"{result.windows:,} walk-forward windows of {a.interval.label} bars; context "
                    f"{result.context_text} bars, {cfg.num_samples} samples, seed {cfg.seed}, "
                    f"fill mode {cfg.fill_mode}, exit {cfg.exit}{', hold' if cfg.hold else ''}"),
        ("Period", f"{result.decision_times[0]:%Y-%m-%d %H:%M} → {result.settle_times[-1]:%Y-%m-%d %H:%M} UTC "
                   "(first decision to last settle)".replace(" 00:00", "")),
        ("Asset class", f"{result.asset_class}: {result.asset_reason}. Calendar {a.calendar}, "
                        f"{a.periods_per_year:,g} periods a year"),
    ]
    rows = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in items)
    rows += "<dt>Warnings</dt>" + ("".join(f'<dd class="warning">{esc(w)}</dd>' for w in warnings) if warnings
                                   else "<dd>none</dd>")
    return (f'<aside class="trust" data-check="trust"><h3>What produced these numbers</h3>{banner}'
            f"<dl>{rows}</dl></aside>")


def _calmar(m: dict) -> str:
    return annual(m, "calmar", "annual_reason", num)


# (label, how to read it off (headline metrics, breadth metrics)); the columns are the walk-forward record and
# buy and hold. Every number is computed in marketcast.backtest.
METRIC_ROWS = (
    ("Total return", lambda m, b: pct(m["return"])),
    ("CAGR", lambda m, b: annual(m)),
    ("Volatility (annualised)", lambda m, b: share(b["volatility"])),
    ("Sharpe ratio", lambda m, b: num(m["sharpe"])),
    ("Sharpe interval (bootstrap)", lambda m, b: interval(m)),
    ("Probabilistic Sharpe (PSR)", lambda m, b: num(m["psr"], "{:.2f}")),
    ("Sortino ratio", lambda m, b: num(m["sortino"])),
    ("Calmar ratio", lambda m, b: _calmar(m)),
    ("Omega ratio", lambda m, b: num(b["omega"], "{:.2f}")),
    ("Max drawdown", lambda m, b: pct(-m["max_drawdown"] or 0.0)),
    ("Average drawdown", lambda m, b: pct(b["avg_drawdown"])),
    ("Longest drawdown (windows)", lambda m, b: count(b["longest_drawdown"])),
    ("Drawdown periods", lambda m, b: count(b["drawdown_periods"])),
    ("Ulcer index", lambda m, b: num(b["ulcer_index"], "{:.4f}")),
    ("Skew", lambda m, b: num(b["skew"])),
    ("Excess kurtosis", lambda m, b: num(b["kurtosis"])),
    ("Tail ratio (95th / 5th percentile)", lambda m, b: num(b["tail_ratio"], "{:.2f}")),
    ("Common sense ratio", lambda m, b: num(b["common_sense"], "{:.2f}")),
    ("Gain to pain ratio", lambda m, b: num(b["gain_to_pain"], "{:.2f}")),
    ("VaR 95% (one window, normal)", lambda m, b: pct(b["var"])),
    ("CVaR 95% (one window, normal)", lambda m, b: pct(b["cvar"])),
    ("Expected return a window (geometric)", lambda m, b: pct(b["expected_return"])),
    ("Average return a window", lambda m, b: pct(m["avg_daily_return"])),
    ("Win rate (trades)", lambda m, b: share(m["win_rate"])),
    ("Win rate (non-zero windows)", lambda m, b: share(b["win_rate"])),
    ("Profit factor", lambda m, b: num(b["profit_factor"], "{:.2f}")),
    ("Payoff ratio (average win / average loss)", lambda m, b: num(b["payoff_ratio"], "{:.2f}")),
    ("Average win", lambda m, b: pct(b["avg_win"])),
    ("Average loss", lambda m, b: pct(b["avg_loss"])),
    ("Kelly criterion", lambda m, b: pct(b["kelly"])),
    ("Best window", lambda m, b: pct(b["best"])),
    ("Worst window", lambda m, b: pct(b["worst"])),
    ("Best month", lambda m, b: pct(b["best_month"])),
    ("Worst month", lambda m, b: pct(b["worst_month"])),
    ("Best year (calendar, not annualised)", lambda m, b: pct(b["best_year"])),
    ("Worst year (calendar, not annualised)", lambda m, b: pct(b["worst_year"])),
    ("Most consecutive wins", lambda m, b: count(b["consecutive_wins"])),
    ("Most consecutive losses", lambda m, b: count(b["consecutive_losses"])),
    ("Time in market", lambda m, b: share(m["exposure"])),
    ("Trades", lambda m, b: count(m["trades"])),
    ("Alpha (annual, vs buy & hold)", lambda m, b: annual(m, "alpha", "alpha_reason")),
    ("Beta (vs buy & hold)", lambda m, b: num(m.get("beta"))),
    ("Information ratio (vs buy & hold)", lambda m, b: num(m.get("information_ratio"))),
)
METRIC_COLUMNS = ("metric", "walk-forward", "buy & hold")


def metric_rows(result: SymbolResult, b: dict[str, Breadth]) -> list[list[str]]:
    """One row per :data:`METRIC_ROWS` entry: the walk-forward record's value, then buy and hold's (``b``:
    :func:`breadth_of`)."""
    sides = ((result.walk_forward["metrics"], b["walk-forward"].metrics),
             (result.benchmark.metrics, b["buy & hold"].metrics))
    return [[label, *(read(m, bm) for m, bm in sides)] for label, read in METRIC_ROWS]


def metrics_note(result: SymbolResult) -> str:
    return (f"{len(METRIC_ROWS)} metrics of the walk-forward record and buy & hold over the same {result.windows:,} "
            f"windows, net of costs, as quantstats defines them (rf = 0; {result.periods_per_year:,g} periods a year; "
            "marketcast.backtest.breadth): volatility and the Sharpe ratio scale by sqrt(periods), CAGR and Calmar "
            f"compound and read {UNDER_A_YEAR} below a year; VaR and CVaR are one window's loss at 95% under a "
            "normal fit; months and years are calendar (UTC) and compounded, never annualised. Win rate (trades) "
            "counts filled trades, win rate (non-zero windows) is quantstats'. The strategy's returns "
            f"{STRATEGY}.")


def metrics_table(result: SymbolResult, b: dict[str, Breadth], key: str) -> str:
    return (f'<div id="{esc(key)}-metrics">' + table(METRIC_COLUMNS, metric_rows(result, b), 0, metrics_note(result))
            + "</div>")


DRAWDOWN_COLUMNS = (("start", False), ("valley", False), ("end (back at the peak)", False), ("depth", True),
                    ("length (windows)", True), ("recovery (windows)", True))


def _when(t) -> str:
    return f"{t:%Y-%m-%d %H:%M}".removesuffix(" 00:00")


def drawdown_rows(result: SymbolResult, b: dict[str, Breadth], top: int = TOP_DRAWDOWNS) -> list[list]:
    """The walk-forward record's ``top`` deepest drawdown periods, deepest first (ties: the earlier)."""
    periods = sorted(b["walk-forward"].drawdowns, key=lambda d: d.depth)[:top]
    t, n = result.settle_times, result.windows
    return [[_when(t[d.start]), _when(t[d.valley]), _when(t[d.end]) if d.end is not None else "not recovered",
             (pct(d.depth), repr(d.depth)), f"{d.length(n):,}", "—" if d.recovery is None else f"{d.recovery:,}"]
            for d in periods]


def drawdown_table(result: SymbolResult, b: dict[str, Breadth], key: str) -> str:
    rows = drawdown_rows(result, b)
    total = len(b["walk-forward"].drawdowns)
    if not rows:
        return f'<p class="empty" id="{esc(key)}-drawdowns">The walk-forward record never fell below its peak.</p>'
    note = (f"The {len(rows)} deepest of {total} drawdown periods of the walk-forward record (click a header to "
            "sort). Start: the first settle bar below the running peak; valley: the lowest; end: the first back at "
            "the peak. Length counts windows under water (to the last window when not recovered), recovery the "
            "windows from the valley back to the peak.")
    return sortable_table(DRAWDOWN_COLUMNS, rows, f"{key}-drawdowns", note)


def price(value: float) -> str:
    """A price with the decimals its size needs (2 from 100 up, 4 from 1, else 6), no thousands commas."""
    return f"{value:.{2 if abs(value) >= 100 else 4 if abs(value) >= 1 else 6}f}"


TRADE_COLUMNS = (("#", True), ("settle bar (UTC)", False), ("strategy", False), ("side", False), ("entry", True),
                 ("exit", True), ("exit reason", False), ("net return", True))


def trade_rows(result: SymbolResult) -> list[list]:
    """Every trade of the walk-forward record, in time order; prices without thousands commas."""
    return [[str(k), _when(t.settle_time), t.strategy, t.label, price(t.entry_price), price(t.exit_price),
             t.exit_reason.replace("_", " "), (f"{t.net_return:+.3%}", repr(t.net_return))]
            for k, t in enumerate(walk_forward_trades(result), start=1)]


def trade_table(result: SymbolResult, key: str, per_page: int = 0) -> str:
    """The walk-forward trades, ``per_page`` at a time in the browser (0: all at once)."""
    rows = trade_rows(result)
    if not rows:
        return f'<p class="empty" id="{esc(key)}-trades">The walk-forward record made no trade.</p>'
    note = (f"All {len(rows):,} trades of the walk-forward record (trades.csv has every strategy's); click a header "
            f"to sort, again to reverse. Each opens and closes inside its settle bar; net return {STRATEGY}.")
    return sortable_table(TRADE_COLUMNS, rows, f"{key}-trades", note, scroll=True, page_size=per_page)
