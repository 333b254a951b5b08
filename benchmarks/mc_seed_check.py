"""The Monte Carlo band against re-runs with other seeds (issue 54): docs/backtest.md quotes its table.

Default backtest settings (70 windows, 256 samples, the baseline) under ``--exit`` (default: the backtest's,
next-open; ``--exit close`` writes ``mc_seed_check_close.json``), seeds 0-9, on the embedded SP500 and NASDAQ
(tests/backtest/test_mc_seed_check.py asserts what holds of the issue's bounds on them), SP500 300 bars earlier, and a
synthetic daily series with Student-t(3) returns. Per figure: the seed sd of the return, the median band over
the seeds and their ratio, in how many seeds the band is flagged unreliable, the run's exponent; per case: the
pooled coverage of other seeds by a seed's band, and how often a window's side differs in another seed where the
seed called it close and elsewhere. On the embedded pair also the error's scaling: the seed sd of full runs at
32, 128, 256 and 512 samples over 40 seeds, and the 10 seeds' band over the 40-seed sd (``scaling``), and the
band a delete-half jackknife of each run would give (``halves``: :func:`half_sample_bands`). Writes
``benchmarks/results/mc_seed_check.json``; about 90 s of CPU.
``--markdown`` prints docs/backtest.md's table from the results file instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from common import RESULTS, write_report  # noqa: E402
from marketcast.backtest.config import BacktestConfig  # noqa: E402
from marketcast.backtest.execution import DEFAULT_EXIT, EXIT_RULES  # noqa: E402
from marketcast.backtest.seed_check import RATIO, check, heavy_tailed_bars, seed_runs  # noqa: E402

from marketcast.data.embedded import load_embedded  # noqa: E402

EARLIER = 300  # bars cut off the end of SP500 for the earlier period
SCALING_SEEDS = 40  # seeds of the scaling check: the sd of 10 seeds is itself uncertain (sigma / s 0.73-1.65, 90 %)
SCALING_SAMPLES = (32, 128, 256, 512)  # 256: the default run's, whose bands are judged


def sd_interval(seeds: int, level: float = 0.90) -> tuple[float, float]:
    """The ``level`` interval of sigma / s for the sd s of ``seeds`` normal returns (s^2 (n - 1) / sigma^2 is
    chi-square with n - 1 dof; e.g. NIST/SEMATECH e-Handbook of Statistical Methods, 7.2.3.1): a band / seed sd
    ratio from 10 seeds is known to within this factor."""
    from scipy.stats import chi2

    lo, hi = chi2.ppf([(1 - level) / 2, (1 + level) / 2], seeds - 1)
    return float(np.sqrt((seeds - 1) / hi)), float(np.sqrt((seeds - 1) / lo))


def scaling(bars, rule: str) -> dict:
    """Per figure: the seed sd of full runs at each of SCALING_SAMPLES samples over SCALING_SEEDS seeds, and the
    median band of seeds 0-9 at the default samples (256) over that size's sd of all the seeds: whether the error
    falls as a power of the samples, which the band's extrapolation from batches of 32-128 samples assumes."""
    full = BacktestConfig().num_samples
    out: dict = {"seeds": SCALING_SEEDS, "samples": list(SCALING_SAMPLES), "full": full, "figures": {}}
    returns, bands = {}, {}
    for size in SCALING_SAMPLES:
        runs = seed_runs(bars, seeds=SCALING_SEEDS, config=BacktestConfig(spa=False, num_samples=size, exit=rule))
        returns[size] = {n: [r.strategies[n].metrics["return"] for r in runs] for n in runs[0].strategies}
        returns[size]["walk-forward"] = [r.walk_forward["metrics"]["return"] for r in runs]
        if size == full:
            bands = {n: [r.monte_carlo.strategies[n].band for r in runs[:10]] for n in runs[0].strategies}
            bands["walk-forward"] = [r.monte_carlo.walk_forward.band for r in runs[:10]]
    for name, values in returns[full].items():
        sd = float(np.std(values, ddof=1))
        if sd < 1e-12:
            continue
        out["figures"][name] = {"seed_sd": {s: float(np.std(returns[s][name], ddof=1)) for s in SCALING_SAMPLES},
                                "band_over_sd": float(np.median(bands[name])) / sd}
    return out


class HalfOf:
    """One half of another forecaster's samples: sample i of S is kept where batch i mod 8 (the Monte Carlo
    error's strided batches) lies on ``side`` of Hadamard column ``column`` (parity of popcount(b & column)), so
    a whole run on it is a run on half the samples the full run read."""

    def __init__(self, inner, column: int, side: int) -> None:
        self.inner, self.column, self.side = inner, column, side
        self.name, self.fields = inner.name, inner.fields

    def forecast(self, batch, horizon, num_samples, seed=0):
        from marketcast.forecast.base import Forecast

        full = self.inner.forecast(batch, horizon, 2 * num_samples, seed)
        keep = [i for i in range(2 * num_samples) if bin((i % 8) & self.column).count("1") % 2 == self.side]
        return Forecast(full.samples[:, :, keep], full.fields, dict(full.meta))


def half_sample_bands(bars, rule: str, seeds: int = 10) -> dict:
    """The fallback tried for the bands that run wide: balanced half-samples (McCarthy 1969, "Pseudo-replication:
    half samples", Rev. Int. Stat. Inst. 37:239-264), the delete-half jackknife of Shao & Wu (1989, Ann. Statist.
    17:1176-1197; consistent for non-smooth statistics such as quantiles, where the delete-one jackknife is not).
    The 7 non-constant columns of the order-8 Hadamard matrix split the 8 batches into complementary halves of
    S/2 samples; SE^2 = mean over the columns of (half - other half)^2 / 4 (with the finite-population factor
    1/2 of a half drawn without replacement, the variance of the full-sample figure; for a mean it equals the
    batch-means SE^2 with 7 dof), the band t(0.975, 7) * sqrt(2) * SE. Per figure: the median band over the
    seeds over the seed sd, and the median over the seeds of SE / the run's own SE (the two in-run estimates
    agree where about 1). Costs 14 more runs a seed: measured here, not in the default run."""
    from scipy.stats import t as student

    from marketcast.backtest.engine import run_many
    from marketcast.forecast.baseline import BaselineForecaster

    full = BacktestConfig(spa=False, exit=rule)
    runs = seed_runs(bars, seeds=seeds, config=full)
    columns = range(1, 8)

    def figures(r) -> dict:
        return {**{n: s.metrics["return"] for n, s in r.strategies.items()}, "walk-forward": r.walk_forward["metrics"]["return"]}

    half_config = BacktestConfig(spa=False, exit=rule, num_samples=full.num_samples // 2)
    ses = []
    for seed in range(seeds):
        pairs = [[figures(run_many([bars], HalfOf(BaselineForecaster(), c, side), replace(half_config, seed=seed))[0])
                  for side in (0, 1)] for c in columns]
        ses.append({n: float(np.sqrt(np.mean([(a[n] - b[n]) ** 2 / 4 for a, b in pairs]))) for n in pairs[0][0]})
    t = float(student.ppf(0.975, len(columns)))
    out = {"columns": len(columns), "figures": {}}
    for name in ses[0]:
        values = [figures(r)[name] for r in runs]
        sd = float(np.std(values, ddof=1))
        if sd < 1e-12:
            continue
        own = [r.monte_carlo.walk_forward if name == "walk-forward" else r.monte_carlo.strategies[name] for r in runs]
        out["figures"][name] = {
            "band_over_sd": float(np.median([t * np.sqrt(2.0) * s[name] for s in ses])) / sd,
            "se_over_run_se": float(np.median([s[name] / e.se for s, e in zip(ses, own) if e.se > 0]))}
    return out


def cases() -> dict:
    sp500 = load_embedded("SP500")
    return {"SP500": sp500, "NASDAQ": load_embedded("NASDAQ"),
            f"SP500, {EARLIER} bars earlier": sp500.head(len(sp500) - EARLIER),
            "synthetic Student-t(3) daily": heavy_tailed_bars()}


def results_file(rule: str) -> Path:
    """The results file of one exit rule: ``mc_seed_check.json`` for the default, ``mc_seed_check_close.json``."""
    return RESULTS / ("mc_seed_check.json" if rule == DEFAULT_EXIT else f"mc_seed_check_{rule.replace('-', '_')}.json")


def markdown(report: dict) -> str:
    """docs/backtest.md's table: per case the pooled coverage, the band / sd range of the figures not flagged in
    most seeds, the figures flagged in most seeds, and the close calls' flip rates."""
    rows = ["| data (10 seeds) | pooled coverage | of the bands not flagged | band / seed sd (not flagged in most seeds) "
            "| flagged in most seeds | close calls: side differs in another seed, close vs other windows |",
            "|---|---|---|---|---|---|"]
    for label, c in report["cases"].items():
        most = {n: f for n, f in c["figures"].items() if 2 * f["flagged"] > f["seeds"]}
        ratios = {n: f["ratio"] for n, f in c["figures"].items() if n not in most and f["ratio"] is not None}
        outside = [f"{n} {r:.2f}" for n, r in ratios.items() if not RATIO[0] <= r <= RATIO[1]]
        span = f"{min(ratios.values()):.2f}-{max(ratios.values()):.2f}" if ratios else "—"
        flagged = ", ".join(f"{n} ({f['flagged']} of {f['seeds']})" for n, f in most.items()) or "none"
        rows.append(f"| {label} ({c['period'][0][:10]} → {c['period'][1][:10]}) | {100 * c['coverage']:.1f} % | "
                    f"{100 * c['coverage_unflagged']:.1f} % | "
                    f"{span}{' (outside: ' + ', '.join(outside) + ')' if outside else ''} | {flagged} | "
                    f"{100 * c['flip_rate_close']:.1f} % vs {100 * c['flip_rate_other']:.1f} % "
                    f"({100 * c['close_share']:.0f} % of decisions close) |")
    if "halves" in report:  # the delete-half jackknife tried as a fallback (half_sample_bands)
        rows += ["", "| data (10 seeds) | delete-half jackknife: band / seed sd | its SE / the run's SE |", "|---|---|---|"]
        for label, h in report["halves"].items():
            f = h["figures"]
            rows.append(f"| {label} | " + ", ".join(f"{n} {v['band_over_sd']:.2f}" for n, v in f.items()) + " | "
                        + ", ".join(f"{n} {v['se_over_run_se']:.2f}" for n, v in f.items()) + " |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exit", choices=EXIT_RULES, default=DEFAULT_EXIT, dest="rule",
                        help=f"the backtest's exit rule (default {DEFAULT_EXIT}, the backtest's default)")
    parser.add_argument("--markdown", action="store_true", help="print the docs table from the results file")
    args = parser.parse_args()
    if args.markdown:
        print(markdown(json.loads(results_file(args.rule).read_text())))
        return
    console = Console()
    report = {"seeds": 10, "exit": args.rule,
              "settings": f"default backtest (70 windows, 256 samples, baseline), SPA off, exit {args.rule}",
              "cases": {}}
    for label, bars in cases().items():
        runs = seed_runs(bars, config=BacktestConfig(spa=False, exit=args.rule))
        c = check(runs)
        c["period"] = [runs[0].decision_times[0].isoformat(), runs[0].settle_times[-1].isoformat()]
        c["exponents"] = [r.monte_carlo.walk_forward.exponent for r in runs]
        report["cases"][label] = c
        table = Table(title=f"{label} ({c['period'][0][:10]} → {c['period'][1][:10]}): pooled coverage "
                            f"{100 * c['coverage']:.1f} % ({100 * c['coverage_unflagged']:.1f} % of the bands not "
                            f"flagged), close calls flip {100 * c['flip_rate_close']:.0f} % vs "
                            f"{100 * c['flip_rate_other']:.0f} % ({100 * c['close_share']:.0f} % of decisions close), "
                            f"exponent median {np.median([e for e in c['exponents'] if e is not None]):.2f}")
        for col in ("figure", "seed sd pts", "band pts (median)", "band / sd", "flagged", "covered"):
            table.add_column(col, justify="left" if col == "figure" else "right")
        for name, f in c["figures"].items():
            table.add_row(name, f"{100 * f['seed_sd']:.2f}", f"{100 * f['band_median']:.2f}",
                          "—" if f["seed_sd"] < 1e-12 else f"{f['ratio']:.2f}", f"{f['flagged']}/{f['seeds']}",
                          f"{f['covered']}/{f['pairs']}")
        console.print(table)
    report["sd_interval_10_seeds"] = sd_interval(10)
    report["scaling"] = {}
    for label in ("SP500", "NASDAQ"):
        sc = report["scaling"][label] = scaling(load_embedded(label), args.rule)
        full = sc["full"]
        table = Table(title=f"{label}, {SCALING_SEEDS} seeds: seed sd of full runs by samples over the {full}-sample "
                            f"sd, and the 10 seeds' median band over the {full}-sample sd")
        for col in ("figure", *(f"sd {s}" for s in SCALING_SAMPLES), "band / sd"):
            table.add_column(col, justify="left" if col == "figure" else "right")
        for name, f in sc["figures"].items():
            sd = f["seed_sd"]
            table.add_row(name, *(f"{sd[s] / sd[full]:.2f}" for s in SCALING_SAMPLES), f"{f['band_over_sd']:.2f}")
        console.print(table)
    report["halves"] = {}
    for label in ("SP500", "NASDAQ"):
        h = report["halves"][label] = half_sample_bands(load_embedded(label), args.rule)
        table = Table(title=f"{label}: the delete-half jackknife's band ({h['columns']} balanced half-sample pairs) "
                            f"over the seed sd, and its SE over the run's own")
        for col in ("figure", "band / sd", "SE / run's SE"):
            table.add_column(col, justify="left" if col == "figure" else "right")
        for name, f in h["figures"].items():
            table.add_row(name, f"{f['band_over_sd']:.2f}", f"{f['se_over_run_se']:.2f}")
        console.print(table)
    write_report(results_file(args.rule), report, console)


if __name__ == "__main__":
    main()
