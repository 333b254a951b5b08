"""The leaderboard of ``marketcast models compare`` as cells: one formatting for the terminal table and the
tearsheet's section, so both always show the same numbers.

A row per model, then buy and hold's row once (``benchmark_row`` of :mod:`marketcast.leaderboard.compare`): the
benchmark every model's walk-forward record is read against, not a model's pick. The ``pick`` column says what
the walk-forward rule picked most (its share of the windows), marked where that strategy ignores the forecast.
"""

from __future__ import annotations

from typing import Sequence

from marketcast.forecast.paths import paths_note
from marketcast.report.page import esc

COLUMNS = ("model", "weights", "MASE", "CRPS", "cov80", "Sharpe [95% CI]", "DSR", "max DD", "trades", "pick",
           "win/s", "peak MB", "load s", "device")
TEXT_COLUMNS = ("model", "weights", "pick", "device")
BENCHMARK = "buy & hold"
NOTE = ("Skill and trading: means over the symbols (max DD: the worst; trades: the sum), on the same windows for "
        "every model. Random weights forecast noise: use them for plumbing and speed only.")
PICK_NOTE = ("Trading: the walk-forward pick among the strategies that read the forecast (buy_hold, which ignores "
             "it, is left out); pick: the strategy picked most and its share of the windows; buy & hold: the "
             "benchmark, the same for every model.")


def _fmt(value, spec: str = ".3f") -> str:
    return "—" if value is None else format(value, spec)


def _trading(trading: dict) -> list[str]:
    ci = (f"{_fmt(trading['sharpe'], '+.2f')} [{_fmt(trading['sharpe_ci_low'], '+.2f')}, "
          f"{_fmt(trading['sharpe_ci_high'], '+.2f')}]")
    return [ci, _fmt(trading["dsr"], ".2f"), _fmt(trading["max_drawdown"], ".1%"), str(trading["trades"])]


def pick_text(pick: dict | None) -> str:
    """``maxdiff 45%``, ``buy_hold 60% (forecast-blind)``, or ``flat`` when the rule never picked."""
    if not pick or pick.get("share") is None:
        return "—" if not pick or not pick.get("shares") else "flat"
    blind = " (forecast-blind)" if pick["forecast_blind"] else ""
    return f"{pick['strategy']} {pick['share']:.0%}{blind}"


def cells(row: dict) -> list[str]:
    """One model's row as the texts of :data:`COLUMNS` (the weights without their random flag)."""
    skill, cost = row["skill"], row["cost"]
    return [row["model"], row["weights_source"], _fmt(skill["mase"]), _fmt(skill["crps"], ".5f"),
            _fmt(skill["coverage80"], ".2f"), *_trading(row["trading"]), pick_text(row.get("pick")),
            _fmt(cost["windows_per_s"], ".1f"),
            f"{_fmt(cost['peak_memory_mb'], '.0f')} ({cost['memory_kind']})", _fmt(cost["load_s"], ".2f"),
            cost["device"]]


def benchmark_cells(benchmark: dict) -> list[str]:
    """Buy and hold's row as the texts of :data:`COLUMNS`: trading only (no forecast, no pick, no model cost)."""
    return [BENCHMARK, "benchmark", "—", "—", "—", *_trading(benchmark["trading"]), "—", "—", "—", "—", "—"]


def notes(rows: Sequence[dict]) -> list[str]:
    """A line per model whose trading row cannot tell it from another's, saying why (its pick's ``note``)."""
    return [f"{row['model']}: {row['pick']['note']}" for row in rows if (row.get("pick") or {}).get("note")]


def leaderboard_section(rows: Sequence[dict], anchor_id: str = "leaderboard",
                        benchmark: dict | None = None) -> str:
    """The tearsheet's section: the table, random weights marked in red in their row and named in a banner,
    buy and hold's row last, and a line per model whose record says why it matches another's."""
    head = "".join(f"<th>{esc(c)}</th>" for c in COLUMNS)
    body = []
    for row in rows:
        texts = cells(row)
        if row["random_weights"]:
            texts[1] += " (random)"
        flag = ' class="random" data-check="random-weights"' if row["random_weights"] else ""
        body.append(f"<tr{flag}>" + "".join(f"<td>{esc(t)}</td>" for t in texts) + "</tr>")
    if benchmark:
        body.append('<tr class="benchmark">' + "".join(f"<td>{esc(t)}</td>" for t in benchmark_cells(benchmark))
                    + "</tr>")
    random = [r["model"] for r in rows if r["random_weights"]]
    banner = (f'<p class="banner">RANDOM WEIGHTS: {esc(", ".join(random))}; their rows test the plumbing, not a '
              "model.</p>" if random else "")
    said = "".join(f'<p class="note">{esc(line)}</p>' for line in notes(rows))
    said += f'<p class="note">{esc(paths_note(rows))}</p>' if paths_note(rows) else ""
    note = f"{NOTE} {PICK_NOTE}" if any("pick" in r for r in rows) else NOTE  # runs stored before picks: NOTE
    return (f'<section id="{esc(anchor_id)}"><h2>Models on the same windows</h2>{banner}'
            f'<table class="leaderboard"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
            f'{said}<p class="note">{esc(note)}</p></section>')
