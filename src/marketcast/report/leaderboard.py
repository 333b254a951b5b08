"""The leaderboard of ``marketcast models compare`` as cells: one formatting for the terminal table and the
tearsheet's section, so both always show the same numbers.

A row per model, then buy and hold's row once (``benchmark_row`` of :mod:`marketcast.leaderboard.compare`): the
benchmark every model's walk-forward record is read against, not a model's pick. The ``most picked`` column says
what the walk-forward rule picked in most windows (its share of them), marked where that strategy ignores the
forecast: a name of its own, as the verdict strip's ``pick`` is the in-sample pick.
"""

from __future__ import annotations

from typing import Sequence

from marketcast.backtest.verdict import build as verdict_of
from marketcast.forecast.paths import paths_note
from marketcast.report.page import esc

COLUMNS = ("model", "weights", "MASE", "CRPS", "cov80", "Sharpe [95% CI]", "DSR", "max DD", "trades",
           "most picked", "win/s", "peak MB", "load s", "device")
TEXT_COLUMNS = ("model", "weights", "most picked", "device")
BENCHMARK = "buy & hold"
NOTE = ("Skill and trading: means over the symbols (max DD: the worst; trades: the sum), on the same windows for "
        "every model. Random weights forecast noise: use them for plumbing and speed only.")
NO_TRADES = "no trades"
# The direction in which each ranked column is better; cov80 is best nearest its nominal 0.80. Columns absent
# here (weights, trades, most picked, device) have no better direction and are never marked.
BETTER = {"MASE": "↓", "CRPS": "↓", "cov80": "→0.80", "Sharpe [95% CI]": "↑", "DSR": "↑", "max DD": "↑",
          "win/s": "↑", "peak MB": "↓", "load s": "↓"}
BEST_MARK = " ★"
BEST_NOTE = ("↑ higher is better, ↓ lower is better, →0.80 nearest 0.80 is better; ★ marks the best model row of a "
             "column (ties: each). win/s: windows backtested a second after one warm-up call (the first call and "
             "any compile excluded).")
_KEYS = {"MASE": ("skill", "mase"), "CRPS": ("skill", "crps"), "cov80": ("skill", "coverage80"),
         "Sharpe [95% CI]": ("trading", "sharpe"), "DSR": ("trading", "dsr"), "max DD": ("trading", "max_drawdown"),
         "win/s": ("cost", "windows_per_s"), "peak MB": ("cost", "peak_memory_mb"), "load s": ("cost", "load_s")}
PICK_NOTE = ("Trading: the walk-forward record, which picks among the strategies that read the forecast (buy_hold, "
             "which ignores it, is left out); most picked: the strategy it picked in most windows and its share of "
             "them (not the strip's in-sample pick); buy & hold: the benchmark, the same for every model.")


def most_picked(row: dict) -> dict | None:
    """A model row's ``most_picked`` (:func:`marketcast.leaderboard.compare.pick_summary`); a leaderboard recorded
    before it had that name stored it as ``pick``, and one recorded before either has none."""
    return row.get("most_picked", row.get("pick"))


def model_verdicts(models) -> list[tuple[str, dict]]:
    """The verdict strip's rows of a ``models compare`` page: one per model and symbol, labelled as the
    terminal's (``toto2 SP500``), from each model's results (``models``: the run's reports, a list per model,
    each report with its ``.result``)."""
    return [(f"{rep.result.forecast_meta.get('model')} {rep.result.symbol}", verdict_of(rep.result))
            for reports in models for rep in reports]


def _fmt(value, spec: str = ".3f") -> str:
    return "—" if value is None else format(value, spec)


def _trading(trading: dict) -> list[str]:
    if trading["trades"] == 0:  # nothing was measured: not a Sharpe ratio of zero
        return [NO_TRADES, "—", _fmt(trading["max_drawdown"], ".1%"), "0"]
    ci = (f"{_fmt(trading['sharpe'], '+.2f')} [{_fmt(trading['sharpe_ci_low'], '+.2f')}, "
          f"{_fmt(trading['sharpe_ci_high'], '+.2f')}]")
    return [ci, _fmt(trading["dsr"], ".2f"), _fmt(trading["max_drawdown"], ".1%"), str(trading["trades"])]


def most_picked_text(pick: dict | None) -> str:
    """``maxdiff 45%``, ``buy_hold 60% (forecast-blind)``, or ``flat`` when the rule never picked."""
    if not pick or pick.get("share") is None:
        return "—" if not pick or not pick.get("shares") else "flat"
    blind = " (forecast-blind)" if pick["forecast_blind"] else ""
    return f"{pick['strategy']} {pick['share']:.0%}{blind}"


def cells(row: dict) -> list[str]:
    """One model's row as the texts of :data:`COLUMNS` (the weights without their random flag)."""
    skill, cost = row["skill"], row["cost"]
    return [row["model"], row["weights_source"], _fmt(skill["mase"]), _fmt(skill["crps"], ".5f"),
            _fmt(skill["coverage80"], ".2f"), *_trading(row["trading"]), most_picked_text(most_picked(row)),
            _fmt(cost["windows_per_s"], ".1f"),
            f"{_fmt(cost['peak_memory_mb'], '.0f')} ({cost['memory_kind']})", _fmt(cost["load_s"], ".2f"),
            cost["device"]]


def headers() -> list[str]:
    """:data:`COLUMNS` with each ranked column's better direction (:data:`BETTER`), e.g. ``MASE ↓``."""
    return [f"{c} {BETTER[c]}" if c in BETTER else c for c in COLUMNS]


def _score(row: dict, column: str) -> float | None:
    """The number ranked in ``column``, oriented so that higher is better (None: unmeasured, never best)."""
    part, key = _KEYS[column]
    value = row[part][key]
    if value is None or (part == "trading" and row["trading"]["trades"] == 0 and key != "max_drawdown"):
        return None
    if BETTER[column] == "↓":
        return -value
    return -abs(value - 0.8) if column == "cov80" else value


def best(rows: Sequence[dict]) -> dict[str, list[str]]:
    """For each ranked column (:data:`BETTER`), the models of the best measured value (ties: each); a column
    no model measured is left out. The benchmark row is not a model and is never ranked."""
    out = {}
    for column in BETTER:
        scores = [(_score(r, column), r["model"]) for r in rows]
        top = max((s for s, _ in scores if s is not None), default=None)
        if top is not None:
            out[column] = [m for s, m in scores if s == top]
    return out


def marked_cells(rows: Sequence[dict]) -> list[list[str]]:
    """:func:`cells` of each row with :data:`BEST_MARK` after the best value of each ranked column."""
    winners, out = best(rows), []
    for row in rows:
        texts = cells(row)
        for column, models in winners.items():
            if row["model"] in models:
                texts[COLUMNS.index(column)] += BEST_MARK
        out.append(texts)
    return out


def benchmark_cells(benchmark: dict) -> list[str]:
    """Buy and hold's row as the texts of :data:`COLUMNS`: trading only (no forecast, no pick, no model cost)."""
    return [BENCHMARK, "benchmark", "—", "—", "—", *_trading(benchmark["trading"]), "—", "—", "—", "—", "—"]


def notes(rows: Sequence[dict]) -> list[str]:
    """A line per model whose trading row cannot tell it from another's, saying why (its most picked's
    ``note``), and a line per model whose checkpoint may have seen some windows in pretraining: its record split
    there."""
    return ([f"{row['model']}: {most_picked(row)['note']}" for row in rows if (most_picked(row) or {}).get("note")]
            + [split_line(row) for row in rows if (row.get("pretraining") or {}).get("label")])


def skipped_line(skipped: Sequence[dict]) -> str:
    """The line naming the models ``--skip-missing`` left out ('' when none), with why: the terminal and the page
    say the same words."""
    if not skipped:
        return ""
    return ("left out by --skip-missing (not run, not in the table): "
            + "; ".join(f"{s['model']}: {s['reason']}" for s in skipped))


def split_line(row: dict) -> str:
    """``kronos: possibly inside pretraining data of NeoQuasar/Kronos-small up to 2025-08-31: before 6 windows,
    return +1.20%, Sharpe 0.50; after 0 windows``: the walk-forward record either side of the boundary."""
    p = row["pretraining"]

    def side(name: str) -> str:
        s = p[name]
        if not s["windows"]:
            return f"{name} 0 windows"
        ret = "—" if s["return"] is None else f"{100 * s['return']:+.2f}%"
        sharpe = "—" if s["sharpe"] is None else f"{s['sharpe']:.2f}"
        return f"{name} {s['windows']} windows, return {ret}, Sharpe {sharpe}"

    return f"{row['model']}: {p['label']} of {p['checkpoint']} up to {p['until']}: {side('before')}; {side('after')}"


def random_banner(rows: Sequence[dict]) -> str:
    """The red line naming the models run with random weights ('' when none): a models compare page shows it
    under its verdict strip and again over the leaderboard table."""
    random = [r["model"] for r in rows if r["random_weights"]]
    return (f'<p class="banner">RANDOM WEIGHTS: {esc(", ".join(random))}; their rows test the plumbing, not a '
            "model.</p>" if random else "")


def leaderboard_section(rows: Sequence[dict], anchor_id: str = "leaderboard",
                        benchmark: dict | None = None, skipped: Sequence[dict] = ()) -> str:
    """The tearsheet's section: the table, random weights marked in red in their row and named in a banner,
    the models ``--skip-missing`` left out named over the table, buy and hold's row last, and a line per model
    whose record says why it matches another's."""
    head = "".join(f"<th>{esc(c)}</th>" for c in headers())
    body = []
    for row, texts in zip(rows, marked_cells(rows)):
        if row["random_weights"]:
            texts[1] += " (random)"
        flag = ' class="random" data-check="random-weights"' if row["random_weights"] else ""
        body.append(f"<tr{flag}>" + "".join(f"<td>{esc(t)}</td>" for t in texts) + "</tr>")
    if benchmark:
        body.append('<tr class="benchmark">' + "".join(f"<td>{esc(t)}</td>" for t in benchmark_cells(benchmark))
                    + "</tr>")
    banner = random_banner(rows)
    banner += f'<p class="warning" data-check="skipped-models">{esc(skipped_line(skipped))}</p>' if skipped else ""
    said = "".join(f'<p class="note">{esc(line)}</p>' for line in notes(rows))
    said += f'<p class="note">{esc(paths_note(rows))}</p>' if paths_note(rows) else ""
    note = f"{NOTE} {PICK_NOTE}" if any(most_picked(r) for r in rows) else NOTE  # runs stored before picks: NOTE
    return (f'<section id="{esc(anchor_id)}"><h2>Models on the same windows</h2>{banner}'
            f'<div class="wide"><table class="leaderboard"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}'
            f'</tbody></table></div><details class="note"><summary>How to read this table</summary>'
            f'{said}<p class="note">{esc(note)} {esc(BEST_NOTE)}</p></details></section>')
