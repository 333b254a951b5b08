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
from marketcast.backtest.engine import SymbolResult

WALK_FORWARD = "walk-forward"
BUY_AND_HOLD = "buy & hold"
PER_BAR = "buy_hold"  # the seeds' strategy: a round trip per bar, marked so it is not read as buy and hold


def pct(x) -> str:
    return "—" if x is None else f"{100 * x:+.2f}%"


def num(x, fmt="{:+.2f}") -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else fmt.format(x)


def interval(m: dict) -> str:
    lo, hi = m.get("sharpe_ci_low"), m.get("sharpe_ci_high")
    return "—" if lo is None or hi is None else f"[{lo:+.1f}, {hi:+.1f}]"


def level(result: SymbolResult) -> str:
    return f"{result.config.confidence:.0%} CI"


def title(result: SymbolResult) -> str:
    a = result.annualisation
    return (f"{result.symbol} · {result.asset_class} · {a.interval.label} bars · {a.periods_per_year:,g} periods a "
            f"year · {result.windows} windows {result.decision_times[0]:%Y-%m-%d} → {result.settle_times[-1]:%Y-%m-%d}")


def strategy_label(name: str, best: str | None) -> str:
    return f"{name}{'†' if name == PER_BAR else ''}{'*' if name == best else ''}"


def never_traded(result: SymbolResult) -> list[str]:
    return [n for n, r in result.strategies.items() if r.metrics["trades"] == 0]


TRACK_COLUMNS = ("", "return", "annual", "Sharpe", "CI", "PSR", "max DD", "trades")


def track_rows(result: SymbolResult) -> list[list[str]]:
    """The headline: the walk-forward record and buy and hold, over the same windows."""
    rows = []
    for label, m in ((WALK_FORWARD, result.walk_forward["metrics"]), (BUY_AND_HOLD, result.benchmark.metrics)):
        rows.append([label, pct(m["return"]), pct(m["annual_return"]), num(m["sharpe"]), interval(m),
                     num(m["psr"], "{:.2f}"), pct(-m["max_drawdown"] or 0.0), str(m["trades"])])
    return rows


def track_note(result: SymbolResult) -> str:
    wf = result.walk_forward["metrics"]
    return (f"Walk-forward: {result.config.selection.describe()}. Buy & hold: {BENCHMARK_DESCRIPTION}. "
            f"Walk-forward against buy & hold: alpha {pct(wf['alpha'])}, beta {num(wf['beta'])}, information "
            f"ratio {num(wf['information_ratio'])}. Net of costs; Sharpe × sqrt({result.periods_per_year:g}) with "
            f"its bootstrap {level(result)}; PSR = probability that the true Sharpe is above 0.")


IN_SAMPLE_COLUMNS = ("strategy", "return", "Sharpe", "CI", "PSR", "alpha", "beta", "IR", "trades")


def in_sample_rows(result: SymbolResult, information_ratio: bool = True) -> list[list[str]]:
    """One row per strategy; ``information_ratio=False`` leaves the IR column out (an 80-column terminal)."""
    best = result.best_strategy
    rows = [[strategy_label(name, best), pct(m["return"]), num(m["sharpe"]), interval(m), num(m["psr"], "{:.2f}"),
             pct(m["alpha"]), num(m["beta"]), num(m["information_ratio"]), str(m["trades"])]
            for name, m in ((n, r.metrics) for n, r in result.strategies.items())]
    return rows if information_ratio else [row[:7] + row[8:] for row in rows]


def in_sample_note(result: SymbolResult, information_ratio: bool = True) -> str:
    best, idle = result.best_strategy, never_traded(result)
    lead = (f"Best in sample (*): {best}, picked on the windows it is scored on (optimistic)" if best else
            "No strategy traded, so none is best")
    parts = [lead, f"{len(result.strategies)} strategies compared"]
    if idle:
        parts.append(f"never traded: {', '.join(idle)}")
    if PER_BAR in result.strategies:
        parts.append(f"† {PER_BAR} is long each bar open to close (a round trip and two costs per bar), not buy & hold")
    parts.append("alpha, beta and information ratio (IR) against buy & hold" if information_ratio else
                 "alpha and beta against buy & hold (the information ratio is in summary.md and the JSON)")
    return "; ".join(parts) + "."


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
              "high/low ('vs excursion') also the context's average excursion from the previous close.")


def _table(title_: str, columns: Sequence[str], rows: list[list[str]], caption: str) -> Table:
    table = Table(title=title_, caption=caption, box=box.SIMPLE_HEAD, padding=(0, 0), title_justify="left",
                  caption_justify="left")
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i == 0 or col == "model" else "right", no_wrap=True)
    for row in rows:
        table.add_row(*row)
    return table


def track_record_table(result: SymbolResult) -> Table:
    cols = (*TRACK_COLUMNS[:4], level(result), *TRACK_COLUMNS[5:])
    return _table(f"{title(result)}\nOut of sample: the walk-forward track record and the buy & hold benchmark", cols,
                  track_rows(result), track_note(result))


def in_sample_table(result: SymbolResult) -> Table:
    """The strategies without the IR column (the JSON and summary.md have it), to fit 80 columns."""
    cols = (*IN_SAMPLE_COLUMNS[:3], level(result), *IN_SAMPLE_COLUMNS[4:7], *IN_SAMPLE_COLUMNS[8:])
    return _table(f"In sample: {len(result.strategies)} strategies over the same {result.windows} windows", cols,
                  in_sample_rows(result, information_ratio=False),
                  in_sample_note(result, information_ratio=False))


def skill_table(results: Sequence[SymbolResult]) -> Table:
    return _table("Forecast skill for bar t+1", SKILL_COLUMNS, skill_rows(results), SKILL_NOTE)
