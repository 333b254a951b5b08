"""Which return each table uses (issue 29, item 4): every report names it, from these constants.

Read from the code, per window k (decision at the close of bar t, settled on bar t+1, ``O``/``H``/``L``/``C``
the bar's prices):

* **The strategies** (the in-sample table, every strategy's metrics, ``trades.csv``) and **the walk-forward
  record** earn ``side * (exit / entry - 1) - fees`` (:func:`marketcast.backtest.fills.settle_all`): entry at
  ``O_(t+1)`` (a market order) or at a limit inside bar t+1, exit at a take-profit inside bar t+1, else where the
  exit rule says (:mod:`marketcast.backtest.execution`): ``O_(t+2)`` under ``--exit next-open`` (the default:
  open t+1 -> open t+2, the overnight gap included) or ``C_(t+1)`` under ``--exit close`` (open t+1 -> close t+1,
  never overnight); 0 when flat, unfilled or refused as a wash. The words below name both, the default first,
  since every report also names its own rule.
* **Buy & hold** (:mod:`marketcast.backtest.benchmark`) holds through every gap: ``C_(t+1) / C_t - 1`` for every
  window but the first, which is ``O_(t+1) -> C_(t+1)`` (entered at the first settle bar's open), with the
  per-side cost on the first and last window. Close t -> close t+1.
* **Alpha, beta, information ratio** regress the strategy's returns (above) on buy & hold's
  close -> close returns; SPA tests the strategies against those same buy & hold returns.
* **Forecast skill** (MAE, MASE, CRPS) scores the forecast of bar t+1's close/high/low, as returns from
  ``C_t``, against the realised ``C_(t+1) / C_t - 1`` (``H``, ``L`` alike): a forecast error, not a return anyone
  earns. The ``unprofit_shutdown`` signal ("was simple's call right?") is judged open -> close,
  ``sign * (C_(t+1) - O_(t+1)) > 0``.
* **market_return** (summary.md's "market" line) is ``C_last / C_t0 - 1`` from the close of the first decision
  bar: close -> close, one bar more than buy & hold (the first overnight gap and no costs).
"""

from __future__ import annotations

STRATEGY = "open t+1 -> open t+2, or -> close t+1 under --exit close (what the strategy earns)"
CLOSE_TO_CLOSE = "close t -> close t+1"

# The JSON's per-section block: section (a key of the per-symbol JSON) -> the return it uses.
DEFINITIONS = {
    "strategies": STRATEGY,
    "walk_forward": STRATEGY,
    "benchmark": CLOSE_TO_CLOSE,
    "relative": STRATEGY,  # alpha/beta/IR: the strategy's return (this) against the benchmark's (close -> close)
    "selection": STRATEGY,
    "skill": CLOSE_TO_CLOSE,  # the MAE/MASE/CRPS keys of "metrics": forecast errors (see DETAILS)
    "walk_forward_oos": STRATEGY,  # metrics.walk_forward_oos_*
    "benchmark_return": CLOSE_TO_CLOSE,  # metrics.benchmark_return
    "market_return": CLOSE_TO_CLOSE,  # metrics.market_return
    "trades": STRATEGY,  # trades.csv
}

DETAILS = {
    "strategies": "net of costs; entry at the open of bar t+1 (or a limit inside it), exit at a take-profit inside "
                  "it, else at the open of bar t+2 (--exit next-open, the default: held overnight) or at the close "
                  "of bar t+1 (--exit close: never held overnight); 0 when flat, unfilled or refused as a wash",
    "walk_forward": "each window's pick's return, as the strategies'",
    "benchmark": "buy & hold holds overnight: close t -> close t+1 every window except the first, which runs from "
                 "the open of the first settle bar to its close; the per-side cost on the first and last window",
    "relative": "alpha, beta and information ratio regress the strategy's returns (open t+1 -> open t+2, or -> "
                "close t+1 under --exit close) on buy & hold's close t -> close t+1 returns",
    "selection": "DSR and PBO on the strategies' returns (open t+1 -> open t+2, or -> close t+1 under --exit "
                 "close); SPA tests them against buy & hold's close t -> close t+1 returns",
    "skill": "a forecast error, not a return: the forecast of bar t+1's close (high, low) as a return from close t "
             "against the realised close t+1 / close t - 1 (high t+1, low t+1 alike)",
    "walk_forward_oos": "metrics.walk_forward_oos_*: the walk-forward record's, as the strategies'",
    "benchmark_return": "metrics.benchmark_return: buy & hold's, as the benchmark's",
    "market_return": "close of the first decision bar -> close of the last settle bar, no costs",
    "trades": "trades.csv's gross_return and net_return; fc_*_ret are forecasts from close t",
}

SENTENCE = ("Returns: the strategies and the walk-forward record earn open t+1 -> open t+2 (decide at close t, "
            "enter at the open of t+1, exit at the next open, the overnight gap included; --exit close: open t+1 -> "
            "close t+1, exit by its close, never overnight), or exit at a take-profit inside bar t+1; buy & hold "
            "holds overnight and earns close t -> close t+1 (its first window from the open of t+1), so alpha and "
            "beta compare an open-to-open (or intraday) return with a close-to-close one.")
SKILL = ("Skill scores the forecast of bar t+1's close, high and low as returns from close t against the "
         "realised close t -> close t+1 (high, low alike): a forecast error, not a return a strategy earns.")
STRATEGY_NOTE = f"returns {STRATEGY}"
BENCHMARK_NOTE = f"buy & hold: {CLOSE_TO_CLOSE} (holds overnight)"
