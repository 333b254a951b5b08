"""The leaderboard of ``marketcast models compare`` as cells: one formatting for the terminal table and the
tearsheet's section, so both always show the same numbers."""

from __future__ import annotations

from typing import Sequence

from marketcast.report.page import esc

COLUMNS = ("model", "weights", "MASE", "CRPS", "cov80", "Sharpe [95% CI]", "DSR", "max DD", "trades", "win/s",
           "peak MB", "load s", "device")
TEXT_COLUMNS = ("model", "weights", "device")
NOTE = ("Skill and trading: means over the symbols (max DD: the worst; trades: the sum), on the same windows for "
        "every model. Random weights forecast noise: use them for plumbing and speed only.")


def _fmt(value, spec: str = ".3f") -> str:
    return "—" if value is None else format(value, spec)


def cells(row: dict) -> list[str]:
    """One model's row as the texts of :data:`COLUMNS` (the weights without their random flag)."""
    skill, trading, cost = row["skill"], row["trading"], row["cost"]
    ci = (f"{_fmt(trading['sharpe'], '+.2f')} [{_fmt(trading['sharpe_ci_low'], '+.2f')}, "
          f"{_fmt(trading['sharpe_ci_high'], '+.2f')}]")
    return [row["model"], row["weights_source"], _fmt(skill["mase"]), _fmt(skill["crps"], ".5f"),
            _fmt(skill["coverage80"], ".2f"), ci, _fmt(trading["dsr"], ".2f"), _fmt(trading["max_drawdown"], ".1%"),
            str(trading["trades"]), _fmt(cost["windows_per_s"], ".1f"),
            f"{_fmt(cost['peak_memory_mb'], '.0f')} ({cost['memory_kind']})", _fmt(cost["load_s"], ".2f"),
            cost["device"]]


def leaderboard_section(rows: Sequence[dict], anchor_id: str = "leaderboard") -> str:
    """The tearsheet's section: the table, random weights marked in red in their row and named in a banner."""
    head = "".join(f"<th>{esc(c)}</th>" for c in COLUMNS)
    body = []
    for row in rows:
        texts = cells(row)
        if row["random_weights"]:
            texts[1] += " (random)"
        flag = ' class="random" data-check="random-weights"' if row["random_weights"] else ""
        body.append(f"<tr{flag}>" + "".join(f"<td>{esc(t)}</td>" for t in texts) + "</tr>")
    random = [r["model"] for r in rows if r["random_weights"]]
    banner = (f'<p class="banner">RANDOM WEIGHTS: {esc(", ".join(random))}; their rows test the plumbing, not a '
              "model.</p>" if random else "")
    return (f'<section id="{esc(anchor_id)}"><h2>Models on the same windows</h2>{banner}'
            f'<table class="leaderboard"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
            f'<p class="note">{esc(NOTE)}</p></section>')
