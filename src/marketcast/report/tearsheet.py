"""The tearsheet of a backtest run: one HTML page, a section per symbol, the out-of-sample record first.

Per symbol, what answers first (above the fold of a 1280 x 900 screen, measured by
``benchmarks/html_check.py``): one headline line (walk-forward return, Sharpe with its interval, max drawdown,
against buy and hold, DSR), the walk-forward equity against buy and hold with its drawdowns shaded, and the
provenance box (costs, weights, windows, period, asset class, warnings; :mod:`marketcast.report.overview`).
Then the metrics at quantstats' breadth and the drawdown periods, the summary tables (the rows
:mod:`marketcast.backtest.tables` gives the terminal and ``summary.md``), every strategy's equity, drawdowns,
rolling Sharpe and volatility, the walk-forward monthly returns, candles with the walk-forward trades, forecast
fans at chosen dates, forecast skill over time, the calibration of the bar-t+1 forecasts (a reliability diagram
and the PIT histogram), and last the sortable list of the walk-forward trades.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from marketcast.backtest.context import context_text
from marketcast.backtest.execution import describe as describe_exit
from marketcast.backtest.holding import describe as describe_hold
from marketcast.backtest.engine import SymbolResult
from marketcast.backtest.fans import Fan
from marketcast.backtest.glossary import GLOSSARY
from marketcast.backtest.markdown import MORE_COLUMNS, more_rows
from marketcast.backtest.returns import CLOSE_TO_CLOSE, SENTENCE, STRATEGY
from marketcast.backtest.tables import (
    CALIBRATION_COLUMNS,
    IN_SAMPLE_COLUMNS,
    SELECTION_COLUMNS,
    SKILL_COLUMNS,
    SKILL_NOTE,
    TRACK_COLUMNS,
    calibration_note,
    calibration_rows,
    in_sample_note,
    in_sample_rows,
    level,
    selection_rows,
    selection_verdict,
    skill_rows,
    title,
    track_rows,
)
from marketcast.backtest.verdict import build as verdict_of
from marketcast.backtest.verdict import html as verdict_html
from marketcast.data.bars import Bars
from marketcast.report import figures
from marketcast.forecast.paths import paths_text
from marketcast.report.charts import downsampled
from marketcast.report.leaderboard import leaderboard_section, model_verdicts, random_banner
from marketcast.report.overview import (
    breadth_of,
    drawdown_table,
    headline,
    metrics_table,
    trade_table,
    trust_box,
)
from marketcast.report.page import anchor, chart, document, esc, paragraph, table
from marketcast.report.paging import TRADES_PER_PAGE
from marketcast.report.series import skill_window

PAGE_NAME = "report.html"
RETURNS_CAPTION = "Returns: see the glossary's 'returns'."


def see(*anchors: str) -> str:
    """A caption that links to the glossary's entries (by their short labels) instead of repeating them."""
    terms = {a: term for a, term, _ in GLOSSARY}
    return ('<p class="note">Definitions: ' + ", ".join(f'<a href="#{a}">{esc(terms[a])}</a>' for a in anchors)
            + ".</p>")


def glossary_section() -> str:
    """Every definition once, at the page's end (:mod:`marketcast.backtest.glossary`)."""
    items = "".join(f'<dt id="{a}">{esc(term)}</dt><dd>{esc(text)}</dd>' for a, term, text in GLOSSARY)
    return f'<section id="glossary"><h2>Glossary</h2><dl>{items}</dl></section>'


@dataclass(frozen=True)
class SymbolReport:
    """What one symbol's section is drawn from: the backtest result, the bars it read, its fans."""

    result: SymbolResult
    bars: Bars
    fans: list[Fan]


def symbol_reports(results: Sequence[SymbolResult], bars: Sequence[Bars]) -> list[SymbolReport]:
    """Pair each result with its bars and the fans the backtest stored on it (drawn, never forecast here)."""
    by_symbol = {b.symbol: b for b in bars}
    return [SymbolReport(r, by_symbol[r.symbol], list(r.fans)) for r in results]


def scale_note(fig) -> str:
    """What the y axis is, as drawn: a caption must not say "log scale" under a linear axis."""
    if figures.is_log(fig):
        return "Log scale (the curves span more than a factor of 10), ticks at their full values."
    return "Linear scale (the curves span less than a factor of 10; wider spans are drawn on a log scale)."


def overview_chart(r: SymbolResult, key: str) -> str:
    fig = figures.overview_chart(r)
    return chart(f"{key}-overview", fig,
                 "The walk-forward record (red: the selection rule's pick at every bar, out of sample, what the live "
                 "loop would have traded) against buy & hold (dashed); shaded: its fall from the running peak. "
                 + scale_note(fig) + downsampled(r.windows + 1))


def _charts(rep: SymbolReport, key: str) -> list[str]:
    r, n = rep.result, rep.result.windows
    shown = min(figures.CANDLE_WINDOWS, n)
    cfg = r.config
    h = len(rep.fans[0].times) if rep.fans else 0
    equity = figures.equity_chart(r)
    return [
        chart(f"{key}-equity", equity,
              "Each strategy (thin), the walk-forward pick (red: the selection rule's choice at every bar, out of "
              "sample, what the live loop would have traded) and buy & hold of the symbol (dashed). "
              + scale_note(equity) + " " + RETURNS_CAPTION + downsampled(n + 1)),
        chart(f"{key}-drawdown", figures.drawdown_chart(r),
              "Fall of each equity curve from its running peak. " + RETURNS_CAPTION + downsampled(n + 1)),
        chart(f"{key}-rolling", figures.rolling_chart(r),
              "The walk-forward record's Sharpe ratio and volatility over the trailing windows shown in the legend "
              "(half a year of periods, at most half the run; quantstats' rolling_sharpe and rolling_volatility), "
              f"both annualised by sqrt({r.periods_per_year:,g}); empty until that many windows settled. Each "
              f"axis has its own ticks. Returns {STRATEGY}." + downsampled(n)),
        chart(f"{key}-beta", figures.beta_chart(r),
              "The walk-forward record's beta against buy & hold over the same trailing windows: cov / var of the "
              "per-window returns (quantstats' rolling_greeks). 1: moves with the symbol; 0: ignores it; below 0: "
              "against it." + downsampled(n)),
        chart(f"{key}-distribution", figures.distribution_chart(r),
              "Share of windows per bin of net return, the walk-forward record (red) and buy & hold (grey) on the "
              "same bins (about sqrt(windows) of them); vertical lines: the means. Per window, not per month as in "
              f"quantstats' histogram. Returns {STRATEGY}; buy & hold {CLOSE_TO_CLOSE}."),
        chart(f"{key}-yearly", figures.yearly_chart(r),
              "Each calendar year's compounded return (UTC, by settle bar; a partial first or last year is its "
              "part), the walk-forward record beside buy & hold (quantstats' end-of-year returns)."),
        chart(f"{key}-monthly", figures.monthly_chart(r),
              "The walk-forward record's compounded net return per calendar month of the settle bar (UTC); "
              f"the year's total beside it. Returns {STRATEGY}."),
        chart(f"{key}-benchmark-monthly", figures.benchmark_monthly_chart(r),
              f"Buy & hold's compounded return per calendar month over the same windows ({CLOSE_TO_CLOSE}); the "
              "year's total beside it: the months to read the record's against."),
        chart(f"{key}-candles", figures.candle_chart(rep.result, rep.bars),
              f"Bar t+1 of the last {shown:,} of {n:,} windows (candles are not aggregated: each trade opens and "
              "closes inside one bar). Triangles: the walk-forward pick's entries (up: long, down: short); crosses: "
              "its exits, green for a net gain, red for a net loss (or none). Earlier windows are in the equity "
              "and drawdown charts. "
              f"Each trade's return: {STRATEGY}."),
        chart(f"{key}-fans", figures.fan_chart(r.symbol, rep.fans, rep.bars),
              f"The {r.forecast_meta.get('model', 'model')} forecast of the next {h} bars made at each date from "
              f"bars up to that date only ({cfg.num_samples} samples, seed {cfg.seed}, context {cfg.context}): "
              "P10-P90 and P25-P75 bands of the close and the median, against the closes that followed (prices, "
              "not returns)."),
        chart(f"{key}-skill", figures.skill_chart(r, rep.bars),
              f"MASE of the bar-t+1 point forecast ({cfg.point}) over the trailing {skill_window(n)} windows: below "
              "1 beats the naive forecast (close: no change; high and low: the context's average excursion). "
              "Over the whole run these are the skill table's numbers. Errors of the forecast of bar t+1 as a return "
              f"from close t against the realised {CLOSE_TO_CLOSE} (high, low alike): not a return a strategy earns."
              + downsampled(n)),
        chart(f"{key}-reliability", figures.reliability_chart(r),
              "Reliability of the bar-t+1 forecasts: for each quantile level tau, the share of outcomes below the "
              "forecast's tau-quantile (lines), and the coverage of the central 50/80/90/95% intervals with their "
              "Wilson 95% intervals (diamonds); a calibrated forecast lies on the dotted diagonal. "
              + _calibration_scope(r)),
        chart(f"{key}-pit", figures.pit_chart(r),
              "Probability integral transform of each outcome under its forecast, in 10 bins: flat (dotted line) "
              "when calibrated, U-shaped when the forecast is too narrow, humped when too wide, sloped when biased. "
              "KS and chi-square p-values test uniformity. " + _calibration_scope(r)),
    ]


def _calibration_scope(r: SymbolResult) -> str:
    block = r.calibration_report or {}
    return f"Windows: {block.get('scope', 'none')}; {block.get('horizon_note', '')}."


def symbol_section(rep: SymbolReport, key: str, per_page: int = TRADES_PER_PAGE) -> str:
    r = rep.result
    a = r.annualisation
    b = breadth_of(r)
    parts = [f'<section class="symbol" id="{key}"><h2>{esc(title(r))}</h2>', headline(r, key),
             f'<div class="hero">{overview_chart(r, key)}{trust_box(r)}</div>',
             "<h3>Metrics: the walk-forward record against buy &amp; hold</h3>", metrics_table(r, b, key),
             "<h3>Drawdown periods of the walk-forward record</h3>", drawdown_table(r, b, key),
             paragraph(f"{a.periods_per_year:,g} periods a year: {a.how}.")]
    parts += ["<h3>Out of sample: the walk-forward track record against buy &amp; hold</h3>",
              table((*TRACK_COLUMNS[:4], level(r), *TRACK_COLUMNS[5:]), track_rows(r), 2),
              paragraph(f"Walk-forward: {r.config.selection.describe()} Net of costs ({r.costs.note()})."),
              see("g-walk-forward", "g-buy-hold", "g-psr", "g-mc-error", "g-returns"),
              f"<h3>In sample: {len(r.strategies)} strategies over the same {r.windows:,} windows</h3>",
              table((*IN_SAMPLE_COLUMNS[:3], level(r), *IN_SAMPLE_COLUMNS[4:]), in_sample_rows(r), 0, in_sample_note(r)),
              table(MORE_COLUMNS, more_rows(r), 0, f"Every column: the strategy's returns, {STRATEGY}."),
              "<h3>Multiple testing: is the best better than luck?</h3>",
              table(SELECTION_COLUMNS, selection_rows(r), 0), see("g-trials", "g-dsr", "g-pbo", "g-spa")]
    parts += [paragraph(selection_verdict(r), "warning")] if selection_verdict(r) else []
    trades = [f"<h3>Trades of the walk-forward record</h3>{trade_table(r, key, per_page)}"]
    return "".join(parts + _charts(rep, key) + trades) + "</section>"


def tearsheet_html(reports: Sequence[SymbolReport], leaderboard: Sequence[dict] = (),
                   benchmark: dict | None = None, trades_per_page: int = TRADES_PER_PAGE,
                   models: Sequence[Sequence[SymbolReport]] = (), skipped: Sequence[dict] = ()) -> str:
    """The page of one run (every symbol of one grid point); ``leaderboard``: the rows of a ``models compare`` run,
    shown under the verdict strip, before the symbols (every model on the same windows, then ``benchmark``, buy
    and hold's row, and the models ``--skip-missing`` left out, ``skipped``), this page being one model's and
    titled so; ``models``: that run's reports, a list per model, whose verdicts make the strip's rows when there
    is a leaderboard (else this page's symbols); ``trades_per_page``: rows of each trade list shown at a time."""
    results = [rep.result for rep in reports]
    keys = [f"s{i}-{anchor(r.symbol)}" for i, r in enumerate(results)]
    first = results[0]
    cfg = first.config
    subtitle = (f"Generated {first.generated_at}. Model {first.forecast_meta.get('model')}, {cfg.num_samples} samples, "
                f"seed {cfg.seed}, point forecast {cfg.point}, context {context_text(results)}, "
                f"fill mode {cfg.fill_mode}, same-bar {cfg.same_bar}. Returns net of fees and half the spread per "
                f"side; {describe_exit(cfg.exit).replace('`', '')}. "
                + (f"{describe_hold(cfg.exit).capitalize()}. " if cfg.hold else "") + SENTENCE)
    subtitle += f" {paths_text(first.forecast_meta)}" if paths_text(first.forecast_meta) else ""
    rows = model_verdicts(models) if leaderboard and models else [(r.symbol, verdict_of(r)) for r in results]
    body = verdict_html(rows) + random_banner(leaderboard)
    # a models compare page is about the models: their table comes under the strip, before this model's symbols
    body += leaderboard_section(leaderboard, benchmark=benchmark, skipped=skipped) if leaderboard else ""
    body += "".join(symbol_section(rep, key, trades_per_page) for rep, key in zip(reports, keys))
    body += ('<section id="skill"><h2>Forecast skill for bar t+1</h2>'
             f"{table(SKILL_COLUMNS, skill_rows(results), 0, SKILL_NOTE)}"
             "<h3>Calibration for bar t+1</h3>"
             f"{table(CALIBRATION_COLUMNS, calibration_rows(results), 0, calibration_note(results))}</section>")
    nav = ([("leaderboard", "models")] if leaderboard else []) + [(key, r.symbol) for key, r in zip(keys, results)]
    body += glossary_section()
    nav += [("skill", "forecast skill"), ("glossary", "glossary")]
    return document(page_title(results, leaderboard), subtitle, nav, body)


def page_title(results: Sequence, leaderboard: Sequence[dict] = ()) -> str:
    """``marketcast backtest: SP500, NASDAQ``; a ``models compare`` page names the comparison and whose page it
    is: ``marketcast models compare: baseline vs toto2 on SP500 (toto2's page)``."""
    symbols = ", ".join(r.symbol for r in results)
    if not leaderboard:
        return f"marketcast backtest: {symbols}"
    model = results[0].forecast_meta.get("model")
    return (f"marketcast models compare: {' vs '.join(r['model'] for r in leaderboard)} on {symbols} "
            f"({model}'s page)")
