"""Which help panel an option is drawn in: one table for every command, so an option shared by several
commands (``--fee``, ``--data-dir``) sits under the same heading on each page.

An option declared with typer's ``rich_help_panel`` keeps its own panel; any other is looked up here by its
long name, and an option not in the table is a common one, listed first under "Options". A command with
:data:`FLAT_UP_TO` options or fewer prints one flat list: panels help a long page (``backtest --help``,
``trade run --help``), not a short one.
"""

from __future__ import annotations

COMMON = "Options"
FLAT_UP_TO = 16

_TABLE = {
    "Model": ("--device", "--dtype", "--context", "--samples", "--seed", "--point", "--min-context",
              "--shadow", "--shadow-model", "--horizon", "--lora"),
    "Data": ("--data-dir", "--on-duplicate", "--on-bad-line", "--timezone", "--asset-class", "--periods-per-year",
             "--add-latest"),
    "Fills and costs": ("--fill-mode", "--same-bar", "--maxdiff-grid", "--fee", "--half-spread-bps", "--spread",
                        "--slippage-bps", "--borrow-rate", "--cash"),
    "Strategies and selection": ("--ci-low", "--ci-high", "--ci-multiplier", "--select-lookback", "--min-trades",
                                 "--cscv-splits", "--spa", "--strategy"),
    "Calibration": ("--calibrate", "--calibration-min-windows", "--calibration-only", "--calibration"),
    "Sizing": ("--sizing", "--kelly-cap", "--kelly-fraction", "--risk-per-trade", "--equity"),
    "Training": ("--until", "--steps", "--lr", "--batch-size", "--eval-every", "--patience", "--checkpoint-every",
                 "--evaluate"),
    "Output": ("--plots", "--trades-per-page", "--fan-date", "--seeds", "--png", "--plot", "--print-config",
               "--clock-file"),
    "In-sample guard": ("--allow-in-sample", "--require-clean"),
    "Entry gates": ("--min-edge", "--min-sharpe", "--max-drawdown", "--min-dollar-volume", "--require-quote"),
    "Risk limits": ("--max-positions", "--max-exposure", "--per-symbol-cap", "--max-daily-loss",
                    "--max-orders-per-cycle", "--max-orders-per-day", "--max-notional-per-order",
                    "--max-notional-per-symbol", "--flatten-on-halt"),
    "Freshness": ("--interval", "--stale-after", "--max-quote-age", "--max-spread"),
    "Alerts": ("--webhook", "--alert-latency", "--alert-memory-growth", "--alert-recompiles", "--alert-min-return",
               "--alert-min-sharpe"),
}
PANEL_OF = {name: panel for panel, names in _TABLE.items() for name in names}


def panel_of(param) -> str:
    """The panel ``param`` (a click option) is drawn in: its declared ``rich_help_panel``, else the table's by
    its long name, else :data:`COMMON`."""
    declared = getattr(param, "rich_help_panel", None)
    if declared:
        return declared
    long_names = [o for o in (*param.opts, *param.secondary_opts) if o.startswith("--")]
    return next((PANEL_OF[o] for o in long_names if o in PANEL_OF), COMMON)


def grouped(options: list) -> list[tuple[str, list]]:
    """``[(panel, options)]`` in page order: the common options first, then each panel in the table's order,
    then panels declared on the options themselves; one flat :data:`COMMON` list for a short page."""
    if len(options) <= FLAT_UP_TO:
        return [(COMMON, list(options))]
    order = [COMMON, *_TABLE]
    panels: dict[str, list] = {}
    for param in options:
        panel = panel_of(param)
        if panel not in order:
            order.append(panel)
        panels.setdefault(panel, []).append(param)
    return [(panel, panels[panel]) for panel in order if panel in panels]
