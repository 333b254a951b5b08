"""The verdict strip: "can I trust it?" in one place, the same numbers on every surface.

:func:`build` gathers, once per symbol, the figures a reader needs before any chart: the walk-forward record
against buy & hold (points and Sharpe difference), the trials (raw and effective), the deflated Sharpe ratio of
the in-sample pick and of the walk-forward record (Bailey & López de Prado 2014), the probability of backtest
overfitting (Bailey et al. 2017), Hansen's (2005) SPA p-value against buy & hold, the close's 80 % interval
coverage with its Wilson interval, the walk-forward return's Monte Carlo error, the context the windows read and
whether the pick reads the forecast at all. Each gets a status by the thresholds of :data:`THRESHOLDS`
(docs/backtest.md#verdict states them). The result is a plain JSON dict (the backtest JSON's ``"verdict"``);
:func:`cells` formats it, and the terminal (:func:`terminal_lines`), the HTML pages (:func:`html`) and ``runs
show`` all print those cells, so no surface rounds a number its own way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

from rich.markup import escape as escape_markup

from marketcast.backtest import context as seen_context
from marketcast.backtest.strategies import STRATEGIES

GREEN, AMBER, RED, INFO, MISSING = "green", "amber", "red", "info", "missing"
DOC = "docs/backtest.md#verdict"
DSR_GREEN, DSR_AMBER = 0.95, 0.50  # at least: the usual 95 % confidence; below a coin flip is red
PBO_GREEN, PBO_AMBER = 0.20, 0.50  # at most: above 0.5 the in-sample winner is more often below the median
SPA_GREEN, SPA_AMBER = 0.05, 0.10  # at most: Hansen's p-value against buy & hold
COVERAGE_AMBER = 0.10  # the 80 % interval's observed rate within 10 points of 80 %
BLIND_RED = 0.5  # the walk-forward traded a forecast-blind strategy in more than half of its windows
#: The status rules, as docs/backtest.md#verdict states them (value -> green / amber / red).
THRESHOLDS = {
    "vs_buy_hold": "green: more return and a higher Sharpe than buy & hold; red: neither; amber: one of the two",
    "dsr": f"green >= {DSR_GREEN:.2f}, amber >= {DSR_AMBER:.2f}, red below",
    "pbo": f"green <= {PBO_GREEN:.2f}, amber <= {PBO_AMBER:.2f}, red above",
    "spa_p": f"green <= {SPA_GREEN:.2f}, amber <= {SPA_AMBER:.2f}, red above",
    "coverage80": f"green: its Wilson 95% interval holds 80%; amber: within {100 * COVERAGE_AMBER:.0f} points of 80%; "
                  "red: further",
    "mc_error": "green: the band is at most half the gap to buy & hold; amber: at most the gap; red: wider (a "
                "re-run with another seed could reverse who wins)",
    "context": "green: every window read the --context asked for; amber: some read fewer bars",
    "pick": "green: the in-sample pick reads the forecast and so does the walk-forward's in every window; amber: "
            "the walk-forward traded a forecast-blind strategy in some windows (at most half); red: the pick ignores "
            "the forecast, or the walk-forward's did in more than half of the windows",
}


def _finite(x) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def _band(x: float | None, green: float, amber: float, low_is_good: bool = False) -> str:
    if x is None:
        return MISSING
    if low_is_good:
        return GREEN if x <= green else AMBER if x <= amber else RED
    return GREEN if x >= green else AMBER if x >= amber else RED


def _coverage80(result) -> dict | None:
    """The close's 80 % central interval: observed rate and Wilson 95 % interval (None: not computed)."""
    fields = (result.calibration_report or {}).get("fields", {})
    found = [c for c in fields.get("close", {}).get("coverage", []) if abs(c["nominal"] - 0.8) < 1e-9]
    return None if not found else {"rate": found[0]["rate"], "lo": found[0]["lo"], "hi": found[0]["hi"]}


def _blind_share(picked) -> float | None:
    """The share of the walk-forward's windows that traded a forecast-blind strategy (flat windows count as not)."""
    picks = list(picked)
    blind = [p is not None and p in STRATEGIES and not STRATEGIES[p].reads_forecast for p in picks]
    return sum(blind) / len(picks) if picks else None


def _statuses(v: dict) -> dict:
    """Each figure's status by :data:`THRESHOLDS` (trials carry none: ``info``)."""
    points, gap, band, cov, ctx = (v["excess_return_points"], v["sharpe_difference"], v["mc_band_points"],
                                   v["coverage80"], v["context"])
    reads, blind = v["pick_reads_forecast"], v["walk_forward_blind_share"] or 0.0
    return {
        "vs_buy_hold": (MISSING if points is None or gap is None else GREEN if points > 0 and gap > 0
                        else RED if points <= 0 and gap <= 0 else AMBER),
        "mc_error": (MISSING if band is None or points is None else GREEN if band <= abs(points) / 2
                     else AMBER if band <= abs(points) else RED),
        "trials": INFO,
        "dsr_pick": _band(v["dsr_pick"], DSR_GREEN, DSR_AMBER),
        "dsr_walk_forward": _band(v["dsr_walk_forward"], DSR_GREEN, DSR_AMBER),
        "pbo": _band(v["pbo"], PBO_GREEN, PBO_AMBER, low_is_good=True),
        "spa_p": _band(v["spa_pvalue"], SPA_GREEN, SPA_AMBER, low_is_good=True),
        "coverage80": (MISSING if cov is None else GREEN if cov["lo"] <= 0.8 <= cov["hi"]
                       else AMBER if abs(cov["rate"] - 0.8) <= COVERAGE_AMBER else RED),
        "context": MISSING if ctx["min"] is None else GREEN if ctx["min"] >= ctx["asked"] else AMBER,
        "pick": (MISSING if reads is None else RED if not reads or blind > BLIND_RED
                 else AMBER if blind > 0 else GREEN),
    }


def build(result) -> dict:
    """The strip's figures and statuses of one symbol's result (a :class:`~marketcast.backtest.engine.SymbolResult`,
    from a run or decoded from the run store): JSON-ready, the only place they are computed."""
    wf, bh, o = result.walk_forward["metrics"], result.benchmark.metrics, result.overfit
    wf_ret, bh_ret = _finite(wf["return"]), _finite(bh["return"])
    wf_sr, bh_sr = _finite(wf["sharpe"]), _finite(bh["sharpe"])
    mc = getattr(result, "monte_carlo", None)
    seen = seen_context.summary(result.context_seen, result.config.context)
    pick = o.pick
    v = {
        "excess_return_points": None if wf_ret is None or bh_ret is None else 100 * (wf_ret - bh_ret),
        "sharpe_difference": None if wf_sr is None or bh_sr is None else wf_sr - bh_sr,
        "walk_forward_return": wf_ret, "buy_hold_return": bh_ret, "walk_forward_sharpe": wf_sr, "buy_hold_sharpe": bh_sr,
        "trials": int(o.trials), "effective_trials": _finite(o.effective_trials),
        "dsr_pick": _finite(o.dsr_pick), "dsr_walk_forward": _finite(o.dsr_walk_forward), "pbo": _finite(o.pbo),
        "spa_pvalue": _finite(o.spa_pvalue), "coverage80": _coverage80(result),
        "mc_band_points": None if mc is None else 100 * mc.walk_forward.band,
        "context": {"asked": seen["of"], "min": seen["min"], "max": seen["max"]},
        "pick": pick,
        "pick_reads_forecast": None if pick is None or pick not in STRATEGIES else bool(STRATEGIES[pick].reads_forecast),
        "walk_forward_blind_share": _blind_share(result.walk_forward["picked"]),
    }
    meta = getattr(result, "forecast_meta", None) or {}
    if meta.get("pretraining"):  # a public checkpoint whose card dates its pretraining (marketcast.forecast.cards)
        v["pretraining"] = {k: meta.get(k) for k in ("pretraining", "pretraining_windows", "pretraining_until",
                                                     "checkpoint")}
    if meta.get("provenance") == "unknown":  # neither a known checkpoint nor tuned: what they saw is unknown
        v["provenance"] = "unknown"
    return {**v, "status": _statuses(v), "thresholds": DOC}


@dataclass(frozen=True)
class Cell:
    """One figure of the strip: its short ``label`` (a glossary entry, ``anchor``), its ``text`` and status."""

    key: str
    label: str
    anchor: str
    text: str
    status: str


def _num(x, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def cells(v: dict) -> list[Cell]:
    """The strip's cells in reading order: the result, then the selection statistics, then the forecast."""
    s = v["status"]
    eff = v["effective_trials"]
    cov = v["coverage80"]
    ctx = v["context"]
    context = ("—" if ctx["min"] is None else f"{ctx['asked']}" if ctx["min"] == ctx["max"] == ctx["asked"]
               else f"{ctx['min']}-{ctx['max']} of {ctx['asked']}")
    pick = ("none" if v["pick"] is None else v["pick"] + ("" if v["pick_reads_forecast"] is None else
                                                          " (reads the forecast)" if v["pick_reads_forecast"]
                                                          else " IGNORES THE FORECAST"))
    if v.get("walk_forward_blind_share"):
        pick += f"; walk-forward blind {100 * v['walk_forward_blind_share']:.0f}%"
    return [
        Cell("vs_buy_hold", "vs buy & hold", "g-vs-buy-hold",
             f"{_num(v['excess_return_points'], '+.2f')} pts, Sharpe {_num(v['sharpe_difference'], '+.2f')}",
             s["vs_buy_hold"]),
        Cell("mc_error", "MC error", "g-mc-error", "—" if v["mc_band_points"] is None else f"±{v['mc_band_points']:.1f} pts",
             s["mc_error"]),
        Cell("trials", "trials", "g-trials", f"{v['trials']}" + ("" if eff is None else f" ({eff:.1f} eff.)"),
             s["trials"]),
        Cell("dsr_pick", "DSR pick", "g-dsr", _num(v["dsr_pick"], ".2f"), s["dsr_pick"]),
        Cell("dsr_walk_forward", "DSR walk-forward", "g-dsr", _num(v["dsr_walk_forward"], ".2f"), s["dsr_walk_forward"]),
        Cell("pbo", "PBO", "g-pbo", _num(v["pbo"], ".2f"), s["pbo"]),
        Cell("spa_p", "SPA p", "g-spa", _num(v["spa_pvalue"], ".3f"), s["spa_p"]),
        Cell("coverage80", "80% coverage", "g-coverage",
             "—" if cov is None else f"{100 * cov['rate']:.0f}% [{100 * cov['lo']:.0f}, {100 * cov['hi']:.0f}]",
             s["coverage80"]),
        Cell("context", "context", "g-context", context, s["context"]),
        Cell("pick", "pick", "g-pick", pick, s["pick"]),
        *([Cell("provenance", "weights", "g-provenance", "provenance unknown", AMBER)] if v.get("provenance") else []),
        *([_pretraining_cell(v["pretraining"])] if v.get("pretraining") else []),
    ]


def _pretraining_cell(p: dict) -> Cell:
    """Windows a public checkpoint may have seen in pretraining: amber, shown only when there are some."""
    return Cell("pretraining", "pretraining", "g-pretraining",
                f"{p['pretraining']}: {p['pretraining_windows']} windows to {p['pretraining_until']} "
                f"({p['checkpoint']})", AMBER)


#: The strip's three lines on a terminal: the result, the selection statistics, the forecast.
LINES = (("vs_buy_hold", "mc_error", "spa_p"), ("trials", "dsr_pick", "dsr_walk_forward", "pbo"),
         ("coverage80", "context", "pick"))
RICH = {GREEN: "green", AMBER: "yellow", RED: "bold red", INFO: "default", MISSING: "dim"}


def terminal_lines(symbol: str, v: dict) -> list[str]:
    """The strip as rich-markup lines: ``SP500 verdict`` and three lines of cells (about 80 columns each)."""
    by_key = {c.key: c for c in cells(v)}
    exposure = tuple(k for k in ("provenance", "pretraining") if k in by_key)
    lines = LINES + ((exposure,) if exposure else ())
    return [f"[bold]{escape_markup(symbol)} verdict[/bold] [dim]({DOC}; labels: docs/backtest.md#glossary)[/dim]"] + [
        "  " + " · ".join(f"{by_key[k].label} [{RICH[by_key[k].status]}]{escape_markup(by_key[k].text)}[/]"
                          for k in keys) for keys in lines]


def one_line(label: str, v: dict) -> str:
    """The strip on one rich-markup line (the leaderboard: a line per model and symbol), the same cells."""
    return f"[bold]{escape_markup(label)}[/bold]  " + " · ".join(
        f"{c.label} [{RICH[c.status]}]{escape_markup(c.text)}[/]" for c in cells(v))


def plain_lines(symbol: str, v: dict) -> list[str]:
    """:func:`terminal_lines` without markup (``runs show`` prints through ``escape``-free plain text)."""
    from rich.text import Text

    return [Text.from_markup(line).plain for line in terminal_lines(symbol, v)]


STYLE = {GREEN: "#1a7f37", AMBER: "#9a6700", RED: "#cf222e", INFO: "inherit", MISSING: "#6e7781"}


def html(rows: list[tuple[str, dict]], glossary: str = "#") -> str:
    """The strip of every symbol as one block, ``<div id="verdict" class="verdict-strip">`` (the browser check
    finds it by that id): a row per symbol, each cell its label (a link to the glossary entry) and figure,
    coloured by status and marked with it in ``data-status``."""
    return strip_html([(symbol, cells(v)) for symbol, v in rows], glossary)


def strip_html(rows: list[tuple[str, list[Cell]]], glossary: str = "#", note: str | None = None) -> str:
    """Rows of cells (a symbol's, a model's, the live loop's) as the one strip block of :func:`html`; ``note``:
    the HTML of its last line (default: a link to the glossary's thresholds)."""
    body, default = [], f'Statuses: <a href="{glossary}g-verdict">thresholds</a>.'
    for name, row in rows:
        items = "".join(
            f'<span class="verdict-cell" style="margin-right:1em" data-key="{c.key}" data-status="{c.status}">'
            f'<a href="{glossary}{c.anchor}">{escape(c.label)}</a> '
            f'<b style="color:{STYLE[c.status]}">{escape(c.text)}</b></span>' for c in row)
        body.append(f'<div class="verdict-row" data-symbol="{escape(name)}"><strong>{escape(name)}</strong> '
                    f"{items}</div>")
    return ('<div id="verdict" class="verdict-strip" style="display:flex;flex-direction:column;gap:.2em;'
            'padding:.4em .6em;border:1px solid #d0d7de;border-radius:6px;margin:.5em 0;font-size:.92em">'
            f'{"".join(body)}<small>{note or default}</small></div>')
