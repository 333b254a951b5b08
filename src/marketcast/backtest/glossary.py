"""Words once: every definition the reports lean on, in one list. The tearsheet prints it at the page's end
(captions and the verdict strip link to an entry by its anchor), docs/backtest.md#glossary carries the same
terms, and the terminal names the page instead of repeating paragraphs per symbol."""

from __future__ import annotations

from marketcast.backtest.benchmark import DESCRIPTION as BENCHMARK_DESCRIPTION
from marketcast.backtest.returns import SENTENCE
from marketcast.backtest.verdict import THRESHOLDS

#: (anchor, term, definition), in reading order of the verdict strip, then the tables' words.
GLOSSARY: tuple[tuple[str, str, str], ...] = (
    ("g-verdict", "verdict strip",
     ("The figures to read before any chart, coloured by these rules (docs/backtest.md#verdict): "
     + "; ".join(f"{k}: {v}" for k, v in THRESHOLDS.items()) + ".")),
    ("g-answer", "verdict",
     ("The strip's first line, one sentence by the rule of docs/backtest.md#verdict: no edge (the walk-forward "
      "record made no money, or not more than buy & hold at a higher Sharpe), an edge not from the forecast, an "
      "edge within Monte Carlo noise, an edge that does not survive multiple testing, or one that does.")),
    ("g-exit", "exit",
     ("The exit rule the record was scored under (docs/backtest.md#exit-rule): next-open (the default) exits at "
      "the next bar's open, as `trade run` does, a round trip no account is refused; close exits a stock at the "
      "session's close (market-on-close), each stock round trip a day trade.")),
    ("g-vs-buy-hold", "vs buy & hold",
     ("The walk-forward record's net return minus buy & hold's, in percentage points, and its annualised Sharpe "
     "ratio minus buy & hold's, over the same windows.")),
    ("g-mc-error", "MC error",
     ("Monte Carlo error of the walk-forward return: the 95% band, in percentage points, of where a re-run with "
     "another --seed lands (batch means over the forecast samples); '(unreliable for X: use --seeds)' where the "
     "batches of figure X are biased against the full run or their trade counts are overdispersed, or X's state "
     "carries every earlier window's samples (maxdiff).")),
    ("g-trials", "trials",
     ("Strategies with enough trades that the selection rule could pick them; 'eff.': the effective number of "
     "independent ones (eigenvalues of their correlation, Li & Ji 2005).")),
    ("g-dsr", "DSR",
     ("Deflated Sharpe ratio (Bailey & López de Prado 2014): the probability that a Sharpe ratio beats what the "
     "best of the trials reaches by luck. 'DSR pick': the in-sample best strategy's (optimistic: picked on the "
     "windows it is scored on); 'DSR walk-forward': the walk-forward record's, deflated by the selection rules "
     "tried (one rule: equal to its PSR).")),
    ("g-pbo", "PBO",
     ("Probability of backtest overfitting (Bailey et al. 2017, CSCV): the share of in-sample/out-of-sample splits "
     "of the windows where the in-sample winner ranks at or below the median out of sample.")),
    ("g-spa", "SPA p",
     ("Hansen's (2005) superior predictive ability test: the p-value of 'no eligible strategy beats buy & hold' "
     "(stationary bootstrap); small p: some strategy beats it beyond luck.")),
    ("g-coverage", "80% coverage",
     ("The share of bar-t+1 closes inside the forecast samples' central 80% interval, with its Wilson 95% "
     "interval; a calibrated forecast covers 80%.")),
    ("g-context", "context",
     "Real bars of history each window's forecast read (min-max of asked when some windows had fewer)."),
    ("g-pick", "pick",
     ("The in-sample best strategy; flagged when it ignores the forecast (buy_hold: forecast-blind), as its "
     "result then says nothing about the model. Not the leaderboard's 'most picked': the strategy the "
     "walk-forward rule picked in most windows.")),
    ("g-pretraining", "pretraining",
     ("Windows a public checkpoint may have seen while it was pretrained: on or before the data cutoff its card "
      "states (inside pretraining data), or, where the card states none but the corpora hold market prices, "
      "before the end of its release month (possibly inside); their scores may flatter the model. Shown only then.")),
    ("g-provenance", "weights",
     ("Provenance unknown: the weights are neither a known public checkpoint (by hub id, or a folder whose "
      "config.json names one) nor fine-tuned weights with a tuning record, so whether they saw the windows cannot "
      "be said. Shown only then.")),
    ("g-walk-forward", "walk-forward",
     ("At each bar the selection rule picks a strategy from windows settled before it: the out-of-sample record "
     "the live loop would have traded.")),
    ("g-buy-hold", "buy & hold", f"{BENCHMARK_DESCRIPTION[0].upper()}{BENCHMARK_DESCRIPTION[1:]}."),
    ("g-psr", "PSR",
     ("Probabilistic Sharpe ratio (Bailey & López de Prado 2012): the probability that the true Sharpe ratio is "
     "above 0, given the record's length, skewness and kurtosis.")),
    ("g-returns", "returns", SENTENCE),
)


def anchors() -> list[str]:
    return [a for a, _, _ in GLOSSARY]
