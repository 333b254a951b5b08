"""The verdict strip: "can I trust it?" in one place, the same numbers on every surface.

The strip opens with the answer, one sentence (:func:`answer`: no edge, an edge within Monte Carlo noise, an edge
that does not survive multiple testing, or one that does), then the figures it rests on. :func:`build` gathers,
once per symbol, the figures a reader needs before any chart: the walk-forward record against buy & hold (points
and Sharpe difference), the trials (raw and effective), the deflated Sharpe ratio of the in-sample pick and of the
walk-forward record (Bailey & López de Prado 2014), the probability of backtest overfitting (Bailey et al. 2017),
Hansen's (2005) SPA p-value against buy & hold, the close's 80 % interval coverage with its Wilson interval, the
walk-forward return's Monte Carlo error, the context the windows read, whether the pick reads the forecast at
all, and the exit rule every figure was scored under (``--exit``; the default ``next-open`` is the one every
account can execute every day: :mod:`marketcast.backtest.execution`). Each gets a status by the thresholds of :data:`THRESHOLDS` (docs/backtest.md#verdict states them). The result
is a plain JSON dict (the backtest JSON's ``"verdict"``); :func:`cells` formats it, and the terminal
(:func:`terminal_lines`), the HTML pages (:func:`html`) and ``runs show`` all print those cells, so no surface
rounds a number its own way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from html import escape

from rich.markup import escape as escape_markup

from marketcast.backtest import context as seen_context
from marketcast.backtest.strategies import STRATEGIES

GREEN, AMBER, RED, INFO, MISSING = "green", "amber", "red", "info", "missing"
DOC = "docs/backtest.md#verdict"
DSR_GREEN, DSR_AMBER = 0.95, 0.50  # at least: the usual 95 % confidence; below a coin flip is red
PBO_GREEN, PBO_AMBER = 0.20, 0.50  # at most: above 0.5 the in-sample winner is more often below the median
SPA_GREEN, SPA_AMBER = 0.05, 0.10  # at most: Hansen's p-value against buy & hold
# the 80 % interval's observed rate within 10 points of 80 %: exact fractions, compared with the covered/n count,
# so that 70 % and 90 % are amber (``abs(0.7 - 0.8) > 0.1`` holds in binary floating point)
COVERAGE_NOMINAL, COVERAGE_AMBER = Fraction(8, 10), Fraction(1, 10)
BLIND_RED = 0.5  # the walk-forward traded a forecast-blind strategy in more than half of its windows
#: The status rules, as docs/backtest.md#verdict states them (value -> green / amber / red).
THRESHOLDS = {
    "answer": "red: no edge (the walk-forward record made no money, or not more than buy & hold at a higher "
              "Sharpe); amber: an edge not from the forecast, within Monte Carlo noise, or not surviving multiple "
              "testing; green: an edge that survives multiple testing (the rule: docs/backtest.md#verdict)",
    "vs_buy_hold": "green: more return and a higher Sharpe than buy & hold; red: neither; amber: one of the two; at "
                   "most amber when the walk-forward record made no money",
    "dsr": f"green >= {DSR_GREEN:.2f}, amber >= {DSR_AMBER:.2f}, red below",
    "pbo": f"green <= {PBO_GREEN:.2f}, amber <= {PBO_AMBER:.2f}, red above",
    "spa_p": f"green <= {SPA_GREEN:.2f}, amber <= {SPA_AMBER:.2f}, red above; at most amber when the walk-forward "
             "record made no money",
    "coverage80": f"green: its Wilson 95% interval holds 80%; amber: within {100 * COVERAGE_AMBER} points of 80% "
                  "(70% and 90% included); red: further",
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
    """``x`` against two thresholds. Plain float comparison is exact here: DSR is a probability, PBO and the SPA
    p-value are ratios of counts, each rounded once to the nearest double, as the decimal thresholds are."""
    if x is None:
        return MISSING
    if low_is_good:
        return GREEN if x <= green else AMBER if x <= amber else RED
    return GREEN if x >= green else AMBER if x >= amber else RED


def _coverage80(result) -> dict | None:
    """The close's 80 % central interval: observed rate and Wilson 95 % interval (None: not computed)."""
    fields = (result.calibration_report or {}).get("fields", {})
    found = [c for c in fields.get("close", {}).get("coverage", []) if abs(c["nominal"] - 0.8) < 1e-9]
    return None if not found else {k: found[0][k] for k in ("rate", "lo", "hi", "covered", "n")}


def _coverage_status(cov: dict | None) -> str:
    """Green when the Wilson interval holds 80 %; amber when covered/n is within 10 points of 80 %, compared as
    exact fractions of the counts (49 of 70 is 70 %: amber); red further."""
    if cov is None:
        return MISSING
    if cov["lo"] <= 0.8 <= cov["hi"]:
        return GREEN
    return AMBER if abs(Fraction(cov["covered"], cov["n"]) - COVERAGE_NOMINAL) <= COVERAGE_AMBER else RED


def _blind_share(picked) -> float | None:
    """The share of the walk-forward's windows that traded a forecast-blind strategy (flat windows count as not)."""
    picks = list(picked)
    blind = [p is not None and p in STRATEGIES and not STRATEGIES[p].reads_forecast for p in picks]
    return sum(blind) / len(picks) if picks else None


def _bp(points: float) -> int:
    """Percentage points in whole basis points (hundredths of a point, as the strip prints the gap), so that 12 %
    made against 4 % (8.00 points, 7.999999999999999 in floats) meets a band of 8.00 points exactly."""
    return round(100 * points)


def _no_better_than_amber(status: str, v: dict) -> str:
    """A relative figure is never coloured as good on a run whose walk-forward record made no money."""
    made = v["walk_forward_return"]
    return AMBER if status == GREEN and (made is None or made <= 0) else status


def _statuses(v: dict) -> dict:
    """Each figure's status by :data:`THRESHOLDS` (trials carry none: ``info``); the answer's is :func:`answer`'s."""
    points, gap, band, ctx = v["excess_return_points"], v["sharpe_difference"], v["mc_band_points"], v["context"]
    reads, blind = v["pick_reads_forecast"], v["walk_forward_blind_share"] or 0.0
    return {
        "vs_buy_hold": (MISSING if points is None or gap is None else
                        _no_better_than_amber(GREEN, v) if points > 0 and gap > 0
                        else RED if points <= 0 and gap <= 0 else AMBER),
        "mc_error": (MISSING if band is None or points is None else GREEN if 2 * _bp(band) <= _bp(abs(points))
                     else AMBER if _bp(band) <= _bp(abs(points)) else RED),
        "trials": INFO,
        "exit": INFO if v.get("exit") else MISSING,
        "dsr_pick": _band(v["dsr_pick"], DSR_GREEN, DSR_AMBER),
        "dsr_walk_forward": _band(v["dsr_walk_forward"], DSR_GREEN, DSR_AMBER),
        "pbo": _band(v["pbo"], PBO_GREEN, PBO_AMBER, low_is_good=True),
        "spa_p": _no_better_than_amber(_band(v["spa_pvalue"], SPA_GREEN, SPA_AMBER, low_is_good=True), v),
        "coverage80": _coverage_status(v["coverage80"]),
        "context": MISSING if ctx["min"] is None else GREEN if ctx["min"] >= ctx["asked"] else AMBER,
        "pick": (MISSING if reads is None else RED if not reads or blind > BLIND_RED
                 else AMBER if blind > 0 else GREEN),
    }


def _beside(x: float, spec: str, threshold: float) -> str:
    """``x`` as the strip prints it, or to four decimals where that would print the threshold it fails
    (0.9499 against 0.95)."""
    text = format(x, spec)
    return f"{x:.4f}" if float(text) == threshold else text


def answer(v: dict) -> tuple[str, str]:
    """The strip's first line, ``(sentence, status)``: the first of these rules that holds, over the figures of
    :func:`build` (docs/backtest.md#verdict states the same list).

    1. the walk-forward record or buy & hold has no return: "no verdict" (missing);
    2. the walk-forward record made no money (return <= 0): "no edge: the walk-forward record lost 9.65%
       (buy & hold -14.26%)" (red), whatever it did against buy & hold;
    3. it did not beat buy & hold on both return and Sharpe: "no edge over buy & hold" (red);
    4. it traded a forecast-blind strategy in more than half of its windows: "an edge not from the forecast"
       (amber): the model's forecasts did not earn it;
    5. its Monte Carlo band is wider than its smaller margin (over 0 and over buy & hold; points, compared in whole
       basis points): "an edge within Monte Carlo noise" (amber), as a re-run with another seed could lose it; or
       the band is flagged unreliable (its batches are biased, :attr:`marketcast.backtest.montecarlo.McError.biased`):
       "an edge whose Monte Carlo noise is unmeasured" (amber), since a band that cannot be trusted cannot clear
       the edge of noise either (``--seeds`` measures it);
    6. DSR walk-forward below 0.95, SPA p above 0.05 or PBO above 0.50, or one of them not computed: "an edge
       that does not survive multiple testing" (amber), naming the figures that fail and their thresholds;
    7. otherwise "an edge that survives multiple testing" (green).
    """
    wf, bh, points, gap = (v["walk_forward_return"], v["buy_hold_return"], v["excess_return_points"],
                           v["sharpe_difference"])
    if wf is None or bh is None or points is None:
        return "no verdict: the walk-forward record or buy & hold has no return", MISSING
    made, held = 100 * wf, 100 * bh
    if wf <= 0:
        did = f"lost {-made:.2f}%" if wf < 0 else "made nothing"
        return f"no edge: the walk-forward record {did} (buy & hold {held:+.2f}%)", RED
    if not (points > 0 and gap is not None and gap > 0):
        return (f"no edge over buy & hold: {points:+.2f} pts, Sharpe {_num(gap, '+.2f')} (the walk-forward record "
                f"made {made:.2f}%)"), RED
    blind = v["walk_forward_blind_share"]
    if blind is not None and blind > BLIND_RED:
        return (f"an edge not from the forecast: the walk-forward traded forecast-blind strategies in "
                f"{100 * blind:.0f}% of windows"), AMBER
    band = v["mc_band_points"]
    if band is not None and _bp(band) > _bp(min(made, points)):
        return (f"an edge within Monte Carlo noise: made {made:.2f}%, {points:+.2f} pts over buy & hold, a re-run "
                f"±{band:.1f} pts"), AMBER
    if "walk-forward" in (v.get("mc_unreliable") or []):
        return (f"an edge whose Monte Carlo noise is unmeasured: made {made:.2f}%, {points:+.2f} pts over buy & hold, "
                f"but the walk-forward band is unreliable (re-run with --seeds)"), AMBER
    dsr, spa, pbo = v["dsr_walk_forward"], v["spa_pvalue"], v["pbo"]
    tests = (("DSR walk-forward", dsr, ".2f", "<", DSR_GREEN, _band(dsr, DSR_GREEN, DSR_AMBER) == GREEN),
             ("SPA p", spa, ".3f", ">", SPA_GREEN, _band(spa, SPA_GREEN, SPA_AMBER, low_is_good=True) == GREEN),
             ("PBO", pbo, ".2f", ">", PBO_AMBER, _band(pbo, PBO_GREEN, PBO_AMBER, low_is_good=True) in (GREEN, AMBER)))
    failed = [f"{name} not computed" if x is None else f"{name} {_beside(x, spec, threshold)} {op} {threshold:g}"
              for name, x, spec, op, threshold, passed in tests if not passed]
    if failed:
        return f"an edge that does not survive multiple testing: {', '.join(failed)}", AMBER
    return (f"an edge that survives multiple testing: made {made:.2f}%, {points:+.2f} pts over buy & hold, DSR "
            f"walk-forward {dsr:.2f}"), GREEN


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
        "mc_unreliable": [] if mc is None else mc.unreliable,  # biased batches (marketcast.backtest.montecarlo)
        "context": {"asked": seen["of"], "min": seen["min"], "max": seen["max"]},
        "pick": pick,
        "pick_reads_forecast": None if pick is None or pick not in STRATEGIES else bool(STRATEGIES[pick].reads_forecast),
        "walk_forward_blind_share": _blind_share(result.walk_forward["picked"]),
        "exit": result.config.exit,  # the rule every figure above was scored under (marketcast.backtest.execution)
    }
    meta = getattr(result, "forecast_meta", None) or {}
    if meta.get("pretraining"):  # a public checkpoint whose card dates its pretraining (marketcast.forecast.cards)
        v["pretraining"] = {k: meta.get(k) for k in ("pretraining", "pretraining_windows", "pretraining_until",
                                                     "checkpoint")}
    if meta.get("provenance") == "unknown":  # neither a known checkpoint nor tuned: what they saw is unknown
        v["provenance"] = "unknown"
    said, status = answer(v)
    return {"answer": said, **v, "status": {"answer": status, **_statuses(v)}, "thresholds": DOC}


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
    """The strip's cells in reading order: the answer (:func:`answer`), the result, then the selection statistics,
    then the forecast."""
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
        Cell("answer", "verdict", "g-answer", v["answer"], s["answer"]),
        Cell("vs_buy_hold", "vs buy & hold", "g-vs-buy-hold",
             f"{_num(v['excess_return_points'], '+.2f')} pts, Sharpe {_num(v['sharpe_difference'], '+.2f')}",
             s["vs_buy_hold"]),
        Cell("mc_error", "MC error", "g-mc-error", ("—" if v["mc_band_points"] is None else f"±{v['mc_band_points']:.1f} pts")
             + _unreliable(v.get("mc_unreliable")), s["mc_error"]),
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
        Cell("exit", "exit", "g-exit", v.get("exit") or "—", s.get("exit", MISSING)),
        *([Cell("provenance", "weights", "g-provenance", "provenance unknown", AMBER)] if v.get("provenance") else []),
        *([_pretraining_cell(v["pretraining"])] if v.get("pretraining") else []),
    ]


def _unreliable(names: list[str] | None) -> str:
    """The MC error cell's note on biased batches (:attr:`marketcast.backtest.montecarlo.MonteCarlo.unreliable`):
    two figures by name, "and more" past them, so the strip's line keeps its width (and its figures' digits)."""
    if not names:
        return ""
    return f" (unreliable for {', '.join(names[:2])}{' and more' if len(names) > 2 else ''}: use --seeds)"


def _pretraining_cell(p: dict) -> Cell:
    """Windows a public checkpoint may have seen in pretraining: amber, shown only when there are some."""
    return Cell("pretraining", "pretraining", "g-pretraining",
                f"{p['pretraining']}: {p['pretraining_windows']} windows to {p['pretraining_until']} "
                f"({p['checkpoint']})", AMBER)


#: The strip's three lines of figures on a terminal, under its answer: the exit rule and the result scored under it,
#: the selection statistics, the forecast (and a fourth, the weights' exposure, where there is any).
LINES = (("exit", "vs_buy_hold", "mc_error", "spa_p"), ("trials", "dsr_pick", "dsr_walk_forward", "pbo"),
         ("coverage80", "context", "pick"))
RICH = {GREEN: "green", AMBER: "yellow", RED: "bold red", INFO: "default", MISSING: "dim"}


def _markup(c: Cell) -> str:
    return f"{c.label} [{RICH[c.status]}]{escape_markup(c.text)}[/]"


def terminal_lines(symbol: str, v: dict) -> list[str]:
    """The strip as rich-markup lines: ``SP500 verdict`` with the answer, then three lines of cells (about 80
    columns each; print the first with ``soft_wrap``: a long answer stays one line)."""
    by_key = {c.key: c for c in cells(v)}
    exposure = tuple(k for k in ("provenance", "pretraining") if k in by_key)
    return [f"[bold]{escape_markup(symbol)}[/bold] {_markup(by_key['answer'])}"] + [
        "  " + " · ".join(_markup(by_key[k]) for k in keys) for keys in LINES + ((exposure,) if exposure else ())]


def one_line(label: str, v: dict) -> str:
    """The strip on one rich-markup line (the leaderboard: a line per model and symbol), the same cells."""
    return f"[bold]{escape_markup(label)}[/bold]  " + " · ".join(map(_markup, cells(v)))


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
        items = "".join(  # the answer (the backtest's strip) ends its line: the figures follow under it
            f'<span class="verdict-cell" style="margin-right:1em" data-key="{c.key}" data-status="{c.status}">'
            f'<a href="{glossary}{c.anchor}">{escape(c.label)}</a> '
            f'<b style="color:{STYLE[c.status]}">{escape(c.text)}</b></span>' + ("<br>" if c.key == "answer" else "")
            for c in row)
        body.append(f'<div class="verdict-row" data-symbol="{escape(name)}"><strong>{escape(name)}</strong> '
                    f"{items}</div>")
    return ('<div id="verdict" class="verdict-strip" style="display:flex;flex-direction:column;gap:.2em;'
            'padding:.4em .6em;border:1px solid #d0d7de;border-radius:6px;margin:.5em 0;font-size:.92em">'
            f'{"".join(body)}<small>{note or default}</small></div>')
