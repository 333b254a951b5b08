"""``summary.md``: the same headline as the terminal (out of sample first), then every metric in full."""

from __future__ import annotations

from typing import Sequence

from marketcast.backtest import execution, holding
from marketcast.backtest.context import context_text
from marketcast.backtest.engine import SymbolResult
from marketcast.backtest.sizing import skill_text
from marketcast.calibrate.summary import field_line
from marketcast.forecast.paths import paths_text
from marketcast.forecast.cards import pretraining_text, provenance_text
from marketcast.forecast.tuning import IN_SAMPLE, sample_text
from marketcast.backtest.returns import CLOSE_TO_CLOSE, SENTENCE, STRATEGY
from marketcast.backtest.strategies import STRATEGIES
from marketcast.backtest.tables import annual
from marketcast.backtest.tables import (
    CALIBRATION_COLUMNS, IN_SAMPLE_COLUMNS, SEEDS_COLUMNS, SELECTION_COLUMNS, SKILL_COLUMNS, SKILL_NOTE, TRACK_COLUMNS,
    calibration_note, calibration_rows, in_sample_note, in_sample_rows,
    level, num, pct, seeds_note, seeds_rows, seeds_title, selection_note, selection_rows, selection_verdict, skill_rows,
    strategy_label, title, track_note, track_rows,
)

MORE_COLUMNS = ("strategy", "annual", "Sortino", "max DD", "Calmar", "win rate", "exposure", "turnover",
                "final bar")


def _table(columns: Sequence[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(columns))) + "|"]
    return out + ["| " + " | ".join(row) + " |" for row in rows]


def more_rows(result: SymbolResult) -> list[list[str]]:
    best = result.best_strategy
    return [[strategy_label(name, best), annual(m), num(m["sortino"]), pct(-m["max_drawdown"] or 0.0),
             annual(m, "calmar", fmt=num), num(m["win_rate"], "{:.0%}"), f"{m['exposure']:.0%}", f"{m['turnover']:.2f}",
             pct(m["final_day"])] for name, m in ((n, r.metrics) for n, r in result.strategies.items())]


def symbol_section(r: SymbolResult, plot: bool = False) -> list[str]:
    a = r.annualisation
    lines = [f"## {title(r)}", "",
             f"Asset class **{r.asset_class}**: {r.asset_reason}. Calendar {a.calendar}. "
             f"**{a.periods_per_year:,g} periods a year**: {a.how}.", ""]
    lines += [f"> warning: {w}" for w in a.warnings] + ([""] if a.warnings else [])
    lines += [f"> warning: {r.context_warning}", ""] if r.context_warning else []
    lines += [f"Samples: {r.calibration_note}.", ""] if r.calibration_note else []
    sample = sample_text(r.forecast_meta, r.windows)  # tuned --weights: in sample or not
    lines += [f"> {'warning: ' if r.forecast_meta.get('sample') == IN_SAMPLE else ''}{sample}.", ""] if sample else []
    exposed = [t for t in (provenance_text(r.forecast_meta), pretraining_text(r.forecast_meta, r.windows)) if t]
    lines += [line for t in exposed for line in (f"> warning: {t}.", "")]  # provenance, pretraining period
    sizing = getattr(r.config, "sizing", "fixed")
    if sizing != "fixed":
        cap = (f"{r.config.kelly_fraction:g} x b* mu / sigma^2, cap {r.config.kelly_cap:g}" if sizing == "kelly"
               else f"risk per trade {r.config.risk_per_trade:g}")
        lines += [f"Positions sized `{sizing}` ({cap}) from each window's samples and the skill b* measured on "
                  "the windows before it: every return below is size x the unit-size return, costs included.", "",
                  f"Skill b* after the last window (slope +- se over orders): {skill_text(r.skills)}.", ""]
    lines += ["### Out of sample: the walk-forward track record against buy & hold", ""]
    lines += _table((*TRACK_COLUMNS[:4], level(r), *TRACK_COLUMNS[5:]), track_rows(r))
    lines += ["", track_note(r), "",
              f"### In sample: {len(r.strategies)} strategies over the same {r.windows} windows", ""]
    lines += _table((*IN_SAMPLE_COLUMNS[:3], level(r), *IN_SAMPLE_COLUMNS[4:]), in_sample_rows(r))
    lines += ["", in_sample_note(r), ""]
    lines += _table(MORE_COLUMNS, more_rows(r)) + ["", f"Every column: the strategy's returns, {STRATEGY}."]
    if r.seeds:
        lines += ["", f"### {seeds_title(r)}", ""] + _table(SEEDS_COLUMNS, seeds_rows(r)) + ["", seeds_note(r)]
    lines += ["", "### Multiple testing: is the best better than luck?", ""]
    lines += _table(SELECTION_COLUMNS, selection_rows(r)) + ["", selection_note(r)]
    lines += ["", f"**{selection_verdict(r)}**"] if selection_verdict(r) else []
    lines += ["", "Strategies: " + "; ".join(f"`{n}` {STRATEGIES[n].description}" for n in r.strategies) + ".",
              "", f"Market {CLOSE_TO_CLOSE}, compounded from the close of the first decision bar to the close of the "
              f"last settle bar (no costs): {pct(r.market_return)}.", ""]
    return lines + ([f"![equity]({r.symbol}_equity.png)", ""] if plot else [])


def calibration_section(results: Sequence[SymbolResult]) -> list[str]:
    """Coverage and PIT per symbol and field (the terminal's table, then each field in words)."""
    lines = ["## Calibration for bar t+1", ""] + _table(CALIBRATION_COLUMNS, calibration_rows(results))
    lines += ["", calibration_note(results), ""]
    for r in results:
        block = r.calibration_report or {}
        lines += [f"- {r.symbol} {field_line(name, block)}" for name in block.get("fields", {})]
    return lines + [""]


def markdown_summary(results: Sequence[SymbolResult], plots: bool = False) -> str:
    """A Markdown page: per symbol the headline, the in-sample strategies, every metric (and the equity PNG
    when ``plots`` drew it); then forecast skill."""
    lines = ["# Backtest summary", ""]
    if results:
        cfg = results[0].config
        lines += [f"Generated {results[0].generated_at}. Model `{results[0].forecast_meta.get('model')}`, "
                  f"{cfg.num_samples} samples, seed {cfg.seed}, point forecast `{cfg.point}`, "
                  f"context {context_text(results)}, fill mode `{cfg.fill_mode}`, same-bar `{cfg.same_bar}`, "
                  f"MaxDiff grid `{cfg.maxdiff_grid}`. "
                  "Returns are net of fees and half "
                  f"the spread per side; {execution.describe(cfg.exit)}."
                  + (f" {holding.describe(cfg.exit).capitalize()}." if cfg.hold else "")
                  + (f" {paths_text(results[0].forecast_meta)}" if paths_text(results[0].forecast_meta) else ""), "",
                  f"**Which return each table uses.** {SENTENCE}", ""]
    for r in results:
        lines += symbol_section(r, plots)
    if results:
        lines += ["## Forecast skill for bar t+1", ""] + _table(SKILL_COLUMNS, skill_rows(results)) + ["", SKILL_NOTE, ""]
        lines += calibration_section(results)
    return "\n".join(lines)
