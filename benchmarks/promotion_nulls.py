"""The promotion test's error and power, simulated: the issue 54 table (docs/trading.md quotes it).

2,000 runs x 500 days, the test asked after every day at alpha 0.05, on marketcast.trade.test_kit.nulls's
null shapes and seed and three harder ones (:data:`STRESS`) (the fraction of runs ever promoted: false promotions) and on Gaussian edges of 0.2, 0.3
and 0.5 standard deviations (median and 90th percentile of the day of promotion; inf: not within 500 days), with
and without a 60-day minimum (``trade promote --min-decisions 60`` with one symbol). ``--label`` names the column
in ``benchmarks/results/promotion_nulls.json``; the file keeps the other labels. Run on the tree before issue 54
(commit afb7527, the normal-mixture t-test; ``PYTHONPATH=OLD/src``) for the ``before`` column: the old rule
takes running sums, and :func:`promoted` calls whichever the tree has.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path

import numpy as np
from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from common import RESULTS, write_report  # noqa: E402

from marketcast.trade.journal import sequential  # noqa: E402
from marketcast.trade.test_kit.nulls import ALPHA, DAYS, NULLS, RUNS, demeaned_returns  # noqa: E402


def block_bootstrap(rng, shape, block: int = 20) -> np.ndarray:
    """SP500's demeaned returns in 20-day blocks: the volatility clustering an i.i.d. bootstrap drops."""
    r = demeaned_returns("SP500")
    starts = rng.integers(0, len(r) - block, (shape[0], shape[1] // block))
    return r[(starts[:, :, None] + np.arange(block)).reshape(shape[0], -1)]


STRESS = {  # beyond the shapes: what the assumption may not cover
    "+0.01 w.p. 0.99 / -0.99": lambda rng, shape: np.where(rng.random(shape) < 0.99, 0.01, -0.99),
    "-(lognormal - e^0.5)": lambda rng, shape: np.exp(0.5) - rng.lognormal(0.0, 1.0, shape),
    "SP500 20-day blocks": block_bootstrap,
}


def promoted(daily: np.ndarray, min_days: int) -> np.ndarray:
    """The day each run is first promoted (inf: never), at ``min_days`` or later."""
    if "daily" in inspect.signature(sequential.crossed).parameters:
        hit = sequential.crossed(daily, ALPHA)
    else:  # before issue 54: crossed(n, total, squares, alpha)
        n = np.arange(1, daily.shape[1] + 1)
        hit = sequential.crossed(n, daily.cumsum(1), (daily**2).cumsum(1), ALPHA)
    hit = hit & (np.arange(1, daily.shape[1] + 1) >= min_days)
    return np.where(hit.any(axis=1), hit.argmax(axis=1) + 1.0, np.inf)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="after")
    label = parser.parse_args().label
    console = Console()
    column: dict[str, dict] = {}
    for min_days in (1, 60):
        rows = column[f"min_days_{min_days}"] = {}
        for name, draw in {**NULLS, **STRESS}.items():
            rows[name] = float(np.isfinite(promoted(draw(np.random.default_rng(2054), (RUNS, DAYS)), min_days)).mean())
            console.print(f"{label} min {min_days:>2} days  {name:<26} false promotions {rows[name]:.2%}")
        rng = np.random.default_rng(7)
        for edge in (0.2, 0.3, 0.5):
            days = promoted(rng.normal(edge, 1.0, (RUNS, DAYS)), min_days)
            rows[f"edge {edge} sd"] = {"median_days": float(np.median(days)),
                                       "p90_days": float(np.percentile(days, 90)),
                                       "within_500": float(np.isfinite(days).mean())}
            console.print(f"{label} min {min_days:>2} days  edge {edge} sd: median {np.median(days):g} days, "
                          f"90% within {np.percentile(days, 90):g}, {np.isfinite(days).mean():.1%} within {DAYS}")
    path = RESULTS / "promotion_nulls.json"
    report = json.loads(path.read_text()) if path.exists() else {}
    report = {"runs": RUNS, "days": DAYS, "alpha": ALPHA, "columns": {**report.get("columns", {}), label: column}}
    write_report(path, report, console)


if __name__ == "__main__":
    main()
