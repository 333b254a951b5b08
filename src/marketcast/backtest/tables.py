"""What a reader sees first: the rows of the headline tables, shared by the terminal (rich) and Markdown.

Per symbol the headline is the out-of-sample record: the walk-forward pick (the live planner's rule) next to
buy and hold of the symbol. The strategies follow, labelled in-sample: choosing the best of them uses the
very windows it is scored on. A strategy that never traded is never called best.
"""

from __future__ import annotations

import math
from typing import Sequence

from rich import box
from rich.table import Table

from marketcast.backtest.benchmark import DESCRIPTION as BENCHMARK_DESCRIPTION
from marketcast.backtest.engine import HORIZON_NOTE, SymbolResult
from marketcast.backtest.metrics import UNDER_A_YEAR
from marketcast.backtest.returns import CLOSE_TO_CLOSE, SENTENCE, SKILL, STRATEGY
from marketcast.backtest.stats import MIN_NONZERO

WALK_FORWARD = "walk-forward"
BUY_AND_HOLD = "buy & hold"
PER_BAR = "buy_hold"  # the seeds' strategy: a round trip per bar, marked so it is not read as buy and hold


def pct(x) -> str:
    return "—" if x is None else f"{100 * x:+.2f}%"


def num(x, fmt="{:+.2f}") -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else fmt.format(x)


def interval(m: dict) -> str:
    """The Sharpe CI, or why it is not shown ("too few trades (3)", :func:`marketcast.backtest.stats.trust_reason`)."""
    lo, hi = m.get("sharpe_ci_low"), m.get("sharpe_ci_high")
    if lo is None or hi is None:
        return m.get("psr_ci_reason") or "—"
    return f"[{lo:+.1f}, {hi:+.1f}]"


def annual(m: dict, key: str = "annual_return", reason: str = "annual_reason", fmt=pct) -> str:
    """An annualised figure, or "n/a (< 1 year)" where the windows cover less than a year."""
    return UNDER_A_YEAR if m.get(key) is None and m.get(reason) else fmt(m.get(key))


def level(result: SymbolResult) -> str:
    return f"{result.config.confidence:.0%} CI"


def title(result: SymbolResult) -> str:
    a = result.annualisation
    return (f"{result.symbol} · {result.asset_class} · {a.interval.label} bars · {a.periods_per_year:,g} periods a "
            f"year · {result.windows} windows {result.decision_times[0]:%Y-%m-%d} → "
            f"{result.settle_times[-1]:%Y-%m-%d} · exit {result.config.exit}{' · hold' if result.config.hold else ''}")


def strategy_label(name: str, best: str | None) -> str:
    return f"{name}{'†' if name == PER_BAR else ''}{'*' if name == best else ''}"


def never_traded(result: SymbolResult) -> list[str]:
    return [n for n, r in result.strategies.items() if r.metrics["trades"] == 0]


TRACK_COLUMNS = ("", "return", "annual", "Sharpe", "CI", "PSR", "max DD", "trades", "MC ±")


def mc_cell(result: SymbolResult, name: str | None = None) -> str:
    """``±4.7``: the Monte Carlo band, in percentage points, of strategy ``name``'s return (None: the walk-forward
    record's), where a re-run with another seed lands (:mod:`marketcast.backtest.montecarlo`); "—" without an
    estimate (fewer than 32 samples, or a run recorded before it was made)."""
    mc = getattr(result, "monte_carlo", None)
    if mc is None:
        return "—"
    return f"±{100 * (mc.walk_forward if name is None else mc.strategies[name]).band:.1f}"


def mc_note(result: SymbolResult) -> str:
    """What the MC ± column means, with the run's close calls; '' without an estimate."""
    mc = getattr(result, "monte_carlo", None)
    if mc is None:
        return ""
    return (f" MC ±: Monte Carlo error of the return in percentage points, a 95% band of where a re-run with "
            f"another --seed lands, from {mc.batches} batches of {mc.samples // mc.batches} samples "
            f"(docs/backtest.md#monte-carlo-error); close calls: {mc.note()}.")


def track_rows(result: SymbolResult) -> list[list[str]]:
    """The headline: the walk-forward record and buy and hold, over the same windows."""
    rows = []
    for label, m in ((WALK_FORWARD, result.walk_forward["metrics"]), (BUY_AND_HOLD, result.benchmark.metrics)):
        rows.append([label, pct(m["return"]), annual(m), num(m["sharpe"]), interval(m),
                     num(m["psr"], "{:.2f}"), pct(-m["max_drawdown"] or 0.0), str(m["trades"]),
                     mc_cell(result) if label == WALK_FORWARD else "—"])
    return rows


def track_note(result: SymbolResult) -> str:
    wf = result.walk_forward["metrics"]
    return (f"Walk-forward: {result.config.selection.describe()}. Buy & hold: {BENCHMARK_DESCRIPTION}. "
            f"Walk-forward against buy & hold: alpha {annual(wf, 'alpha', 'alpha_reason')}, beta {num(wf['beta'])}, "
            f"information ratio {num(wf['information_ratio'])}. Net of costs ({result.costs.note()}); Sharpe × "
            f"sqrt({result.periods_per_year:g}) with its bootstrap {level(result)}; PSR = probability that the true "
            "Sharpe is above 0; both only with "
            f"at least {result.config.selection.min_trades} trades and {MIN_NONZERO} non-zero returns."
            + (f" Annual figures {UNDER_A_YEAR}: {result.windows:,} bars, {result.periods_per_year:,g} a year; the "
               "return is the period's." if under_a_year(result) else "") + " " + SENTENCE
            + (" MC ±: the walk-forward return's Monte Carlo error in percentage points, a 95% band of where a re-run "
               "with another --seed lands (buy & hold reads no forecast: —)." if result.monte_carlo is not None else ""))


IN_SAMPLE_COLUMNS = ("strategy", "return", "Sharpe", "CI", "PSR", "alpha", "beta", "IR", "trades", "MC ±")


def in_sample_rows(result: SymbolResult, information_ratio: bool = True) -> list[list[str]]:
    """One row per strategy; ``information_ratio=False`` leaves the IR column out (an 80-column terminal)."""
    best = result.best_strategy
    rows = [[strategy_label(name, best), pct(m["return"]), num(m["sharpe"]), interval(m), num(m["psr"], "{:.2f}"),
             annual(m, "alpha", "alpha_reason"), num(m["beta"]), num(m["information_ratio"]), str(m["trades"]),
             mc_cell(result, name)]
            for name, m in ((n, r.metrics) for n, r in result.strategies.items())]
    return rows if information_ratio else [row[:7] + row[8:] for row in rows]


def in_sample_note(result: SymbolResult, information_ratio: bool = True) -> str:
    best, idle, need = result.best_strategy, never_traded(result), result.config.selection.min_trades
    few = [f"{n} ({r.metrics['trades']})" for n, r in result.strategies.items() if 0 < r.metrics["trades"] < need]
    lead = (f"Best in sample (*): {best}, picked on the windows it is scored on (optimistic)" if best else
            f"No strategy has {need} trades, so none is best")
    parts = [lead, f"{len(result.strategies)} strategies compared"]
    if idle:
        parts.append(f"never traded: {', '.join(idle)}")
    if few:
        parts.append(f"too few trades (< {need}) to be best: {', '.join(few)}")
    if PER_BAR in result.strategies:
        parts.append(f"† {PER_BAR} is long each bar open to close (a round trip and two costs per bar), not buy & hold")
    parts.append(f"returns {STRATEGY}")
    if information_ratio:
        parts.append(f"alpha, beta and information ratio (IR) against buy & hold ({CLOSE_TO_CLOSE})")
    elif under_a_year(result):  # the terminal leaves the all-"n/a" alpha column out
        parts.append(f"beta against buy & hold ({CLOSE_TO_CLOSE}); alpha {UNDER_A_YEAR} (the information ratio is "
                     "in summary.md and the JSON)")
    else:
        parts.append(f"alpha and beta against buy & hold ({CLOSE_TO_CLOSE}; the information ratio is in summary.md "
                     "and the JSON)")
    return "; ".join(parts) + "." + mc_note(result)


def under_a_year(result: SymbolResult) -> bool:
    """Fewer windows than periods a year: annualised figures are n/a
    (:func:`marketcast.backtest.metrics.under_a_year`)."""
    return result.windows < result.periods_per_year


SEEDS_COLUMNS = ("", "min", "max", "sd", "in MC band")


def seeds_rows(result: SymbolResult) -> list[list[str]]:
    """``--seeds N``: the spread of each return over the N runs (the walk-forward record first); [] with one seed."""
    block = result.seeds
    if not block:
        return []
    n = len(block["seeds"]) - 1

    def row(label: str, s: dict) -> list[str]:
        inside = "—" if s["inside_mc_band"] is None else f"{s['inside_mc_band']} of {n}"
        return [label, pct(s["min"]), pct(s["max"]), f"{100 * s['sd']:.2f}", inside]

    return [row(WALK_FORWARD, block["walk_forward"])] + [row(k, s) for k, s in block["strategies"].items()]


def seeds_note(result: SymbolResult) -> str:
    seeds = result.seeds["seeds"]
    return (f"Total return over {len(seeds)} runs with seeds {seeds[0]}..{seeds[-1]} (the tables above are seed "
            f"{seeds[0]}'s); sd in percentage points; in MC band: the other runs whose return lies inside seed "
            f"{seeds[0]}'s MC ± band.")


def seeds_title(result: SymbolResult) -> str:
    seeds = result.seeds["seeds"]
    return f"Seeds {seeds[0]}..{seeds[-1]}: the spread of each return"


def seeds_table(result: SymbolResult, notes: bool = True) -> Table:
    return _table(seeds_title(result), SEEDS_COLUMNS, seeds_rows(result), seeds_note(result) if notes else None)


SELECTION_COLUMNS = ("trials", "DSR pick", "WF PSR", "WF DSR", "PBO", "CSCV S", "SPA c→c", "SPA o→c", "SPA cash")


def trials_cell(o) -> str:
    """``3.0 of 6``: the effective number of the eligible strategies, of how many; the count alone below 2."""
    return str(o.trials) if o.effective_trials is None or o.trials < 2 else f"{o.effective_trials:.1f} of {o.trials}"


def selection_rows(result: SymbolResult) -> list[list[str]]:
    """Multiple testing (:mod:`marketcast.backtest.overfit`): one row."""
    o = result.overfit
    return [[trials_cell(o), num(o.dsr_pick, "{:.2f}"), num(o.psr_walk_forward, "{:.2f}"),
             num(o.dsr_walk_forward, "{:.2f}"), num(o.pbo, "{:.2f}"), "—" if o.cscv_splits is None else str(o.cscv_splits),
             num(o.spa_pvalue, "{:.3f}"), num(o.spa_intraday_pvalue, "{:.3f}"),
             num(o.spa_cash_pvalue, "{:.3f}")]]


def selection_verdict(result: SymbolResult) -> str | None:
    """The plain sentence (:meth:`marketcast.backtest.overfit.SelectionStats.verdict`) as its own line; else None."""
    v = result.overfit.verdict()
    return None if v is None else f"{v[0].upper()}{v[1:]}."


def spa_errors(o) -> str:
    """``c→c 0.031 ± 0.004, o→c —, cash 0.000 ± 0.000``: each SPA p-value with its Monte Carlo standard error."""
    cells = (("c→c", o.spa_pvalue, o.spa_mc_error), ("o→c", o.spa_intraday_pvalue, o.spa_intraday_mc_error),
             ("cash", o.spa_cash_pvalue, o.spa_cash_mc_error))
    return ", ".join(f"{label} —" if p is None else f"{label} {p:.3f} ± {e:.3f}" for label, p, e in cells)


def selection_note(result: SymbolResult) -> str:
    o = result.overfit
    need = o.min_trades
    out = [n for n, r in result.strategies.items() if int(r.filled.sum()) < need]
    trials = (f"{o.trials} of {o.strategies} strategies are trials: those with at least {need} trades, which the rule "
              "could pick" + (f" (not: {', '.join(out)})" if out else ""))
    if o.effective_trials is not None and o.trials > 1:
        trials += (f"; effective trials {o.effective_trials:.1f} of {o.trials} ({o.effective_trials_method}), as "
                   "strategies that share a signal are not independent")
    best = f"the in-sample best ({o.pick}, {pct(o.pick_return)})" if o.pick else "the in-sample best (none)"
    pbo = (f"share of the {o.cscv_counted:,} of {o.cscv_combinations:,} CSCV splits of {o.cscv_splits} blocks with two "
           f"candidates (strategies with {need} trades in the in-sample half) where the rule's in-sample winner (the "
           "highest compounded return) is at or below the candidates' median out of sample" if o.pbo is not None
           else "needs 2 windows and 2 strategies with enough trades")
    blocks = "/".join("—" if b is None else str(b) for b in (o.spa_block_size, o.spa_intraday_block_size,
                                                             o.spa_cash_block_size))
    spa = (f"{o.spa_reps:,} stationary-bootstrap resamples, blocks of {blocks}; p ± its Monte Carlo error: "
           f"{spa_errors(o)}" if o.spa_reps
           else "off: --no-spa" if not result.config.spa else "needs 10 windows and an eligible strategy")
    rules = f"{o.walk_forward_rules} selection rule{'s' if o.walk_forward_rules != 1 else ''}"
    return (f"{trials}. DSR pick (Bailey & López de Prado 2014): probability that the Sharpe of {best} beats an "
            f"annual {num(o.expected_max_sharpe)}, what the best of {trials_cell(o).replace(' of ', ' effective of ')} trials reaches by luck. "
            f"WF PSR: probability that the walk-forward record's Sharpe is above 0; WF DSR deflates it by the "
            f"{rules} tried (one pre-declared rule: equal to the PSR). PBO (Bailey et al. 2017): {pbo}. SPA p "
            "(Hansen 2005): p-value of 'no eligible strategy beats the benchmark' against c→c buy & hold "
            f"({CLOSE_TO_CLOSE}), o→c buy & hold intraday (open t+1 -> close t+1, a round trip of costs a bar) and "
            f"cash ({spa}). DSR and PBO use the strategies' returns ({STRATEGY}).")


SKILL_COLUMNS = ("symbol", "model", "MAE c/h/l %", "MASE c/h/l", "vs excursion", "CRPS c %")


def skill_rows(results: Sequence[SymbolResult]) -> list[list[str]]:
    rows = []
    for r in results:
        s = r.skill
        rows.append([r.symbol, str(r.forecast_meta.get("model", "?")),
                     "/".join(f"{100 * s[k]:.3f}" for k in ("close_val_loss", "high_val_loss", "low_val_loss")),
                     "/".join(num(s[f"mase_{f}"], "{:.3f}") for f in ("close", "high", "low")),
                     "/".join(num(s.get(f"mase_{f}_excursion"), "{:.3f}") for f in ("high", "low")),
                     f"{100 * s['crps_close']:.3f}"])
    return rows


SKILL_NOTE = ("MASE < 1 beats a naive forecast: no change (every field = close_t) for close/high/low, and for "
              "high/low ('vs excursion') also the context's average excursion from the previous close. " + SKILL)


CALIBRATION_COLUMNS = ("", "cov 50%", "cov 80%", "cov 90%", "cov 95%", "PIT KS p", "χ² p")


def calibration_rows(results: Sequence[SymbolResult]) -> list[list[str]]:
    """One row per symbol and field: observed coverage [Wilson 95 % CI] per nominal level, PIT p-values."""
    rows = []
    for r in results:
        block = r.calibration_report or {}
        for name, f in block.get("fields", {}).items():
            rows.append([f"{r.symbol} {name}",
                         *(f"{100 * c['rate']:.0f}% [{100 * c['lo']:.0f}, {100 * c['hi']:.0f}]" for c in f["coverage"]),
                         f"{f['pit']['ks_p']:.2f}", f"{f['pit']['chi2_p']:.2f}"])
    return rows


def calibration_note(results: Sequence[SymbolResult]) -> str:
    """Which windows were counted and what the columns mean."""
    scopes = "; ".join(f"{r.symbol}: {(r.calibration_report or {}).get('scope', 'not computed')}"
                       + (f" ({r.config.calibrate})" if r.calibration_note else "") for r in results)
    return (f"Coverage: share of outcomes inside the samples' central interval, with its Wilson 95% CI; PIT KS p and "
            f"χ² p test a uniform 10-bin PIT histogram (small p: miscalibrated). "
            f"{HORIZON_NOTE[0].upper()}{HORIZON_NOTE[1:]}. "
            f"Windows counted: {scopes}.")


def calibration_table(results: Sequence[SymbolResult], notes: bool = True) -> Table:
    model = str(results[0].forecast_meta.get("model", "?")) if results else "?"
    return _table(f"Calibration of {model} for bar t+1", CALIBRATION_COLUMNS, calibration_rows(results),
                  calibration_note(results) if notes else None)


def _table(title_: str | None, columns: Sequence[str], rows: list[list[str]], caption: str | None) -> Table:
    """A headline table; without a caption (the default terminal: its words are in the glossary, --verbose
    prints them) also without the blank edge lines, so a symbol fits one screen."""
    table = Table(title=title_, caption=caption, box=box.SIMPLE_HEAD, padding=(0, 0), title_justify="left",
                  caption_justify="left", show_edge=caption is not None)
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i == 0 or col == "model" else "right", no_wrap=True)
    for row in rows:
        table.add_row(*row)
    return table


def track_record_table(result: SymbolResult, notes: bool = True) -> Table:
    """The headline; under a year without the annual column (n/a in both rows, said in the note), to fit 80
    columns; ``notes`` False: the bare rows (the title line and the verdict strip stand above them)."""
    cols = (*TRACK_COLUMNS[:4], level(result), *TRACK_COLUMNS[5:])
    rows = track_rows(result)
    if under_a_year(result):
        cols, rows = cols[:2] + cols[3:], [row[:2] + row[3:] for row in rows]
    if not notes:
        return _table(None, cols, rows, None)
    return _table(f"{title(result)}\nOut of sample: the walk-forward track record and the buy & hold benchmark", cols,
                  rows, track_note(result))


def in_sample_table(result: SymbolResult, notes: bool = True) -> Table:
    """The strategies without the IR column (the JSON and summary.md have it), to fit 80 columns; under a year
    also without the alpha column (n/a in every row, said in the note)."""
    cols = (*IN_SAMPLE_COLUMNS[:3], level(result), *IN_SAMPLE_COLUMNS[4:7], *IN_SAMPLE_COLUMNS[8:])
    rows = in_sample_rows(result, information_ratio=False)
    if under_a_year(result):
        alpha = cols.index("alpha")
        cols, rows = (*cols[:alpha], *cols[alpha + 1:]), [row[:alpha] + row[alpha + 1:] for row in rows]
    return _table(f"In sample: {len(result.strategies)} strategies over the same {result.windows} windows", cols,
                  rows, in_sample_note(result, information_ratio=False) if notes else None)


def selection_table(result: SymbolResult, notes: bool = True) -> Table:
    return _table("Multiple testing: is the best better than luck?", SELECTION_COLUMNS, selection_rows(result),
                  selection_note(result) if notes else None)


def skill_table(results: Sequence[SymbolResult], notes: bool = True) -> Table:
    return _table("Forecast skill for bar t+1", SKILL_COLUMNS, skill_rows(results), SKILL_NOTE if notes else None)
