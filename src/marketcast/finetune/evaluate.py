"""``marketcast finetune --evaluate``: base against tuned on the same out-of-sample windows, through the backtest,
with the weight-free baseline (``load_forecaster("baseline")``) as a third run on those windows.

Both weights and the baseline are backtested by :func:`marketcast.backtest.engine.run_many` on every window whose decision bar is
after ``--until`` (the same windows, config and seed for all three), and every run goes to the run store like any
``marketcast backtest``. The skill, calibration and trading deltas are printed with a paired test on the per-window
CRPS of the next close: the Diebold-Mariano idea (Diebold & Mariano 1995, "Comparing predictive accuracy", JBES 13)
of testing the mean of the loss differences, here as a paired t-test (``scipy.stats.ttest_rel``) with its 95 %
CI, and the Wilcoxon signed-rank test (Wilcoxon 1945; ``scipy.stats.wilcoxon``) that does not assume normal
differences. One-step forecasts, so the differences need no autocorrelation correction beyond what the tests
assume. The same tests compare tuned and base against the baseline, beside each run's MASE (Hyndman & Koehler
2006, "Another look at measures of forecast accuracy", IJF 22: the MAE over the naive no-change forecast's MAE on
the same windows, < 1 beats it), so a tuned model that only beats a random base is seen not to beat the baseline.
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import numpy as np

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.engine import decision_ends, forecast_windows, run_many
from marketcast.backtest.period import Period
from marketcast.backtest.prepare import prepare
from marketcast.backtest.skill import crps_samples
from marketcast.data.bars import Bars
from marketcast.forecast.registry import load_forecaster

LEVEL = 0.9  # the interval whose coverage the calibration delta reports


def window_crps(forecaster, bars: Bars, config: BacktestConfig, n: int) -> np.ndarray:
    """CRPS of the next close's return per scored window (the first ``n`` windows: those with a bar t+1), from the
    forecasts the backtest makes (same windows, config and seed, so the same samples); their mean is the run's
    ``skill["crps_close"]``."""
    min_context = getattr(forecaster, "min_context", 2)
    ends = decision_ends(len(bars), config, min_context)[:n]
    (fc,) = forecast_windows(forecaster, [(bars, ends)], config)
    close = bars.frame["close"].to_numpy(dtype=np.float64)
    samples = np.asarray(fc.field("close"), dtype=np.float64)[:, :, 0] / close[ends, None] - 1.0
    return crps_samples(samples, close[ends + 1] / close[ends] - 1.0)


def paired_test(base: np.ndarray, tuned: np.ndarray) -> dict:
    """Paired tests on per-window losses: mean difference (base - tuned; > 0: tuned better), its 95 % t CI, the
    t-test's and the Wilcoxon signed-rank test's two-sided p-values."""
    from scipy import stats

    diff = np.asarray(base, dtype=np.float64) - np.asarray(tuned, dtype=np.float64)
    n = len(diff)
    mean = float(diff.mean())
    if n < 2 or not np.any(diff != diff[0]):
        return {"windows": n, "mean_diff": mean, "ci_low": None, "ci_high": None, "t_p": None, "wilcoxon_p": None}
    se = float(diff.std(ddof=1) / np.sqrt(n))
    half = float(stats.t.ppf(0.975, n - 1)) * se
    return {"windows": n, "mean_diff": mean, "ci_low": mean - half, "ci_high": mean + half,
            "t_p": float(stats.ttest_rel(base, tuned).pvalue),
            "wilcoxon_p": float(stats.wilcoxon(diff).pvalue) if np.any(diff != 0) else 1.0}


def _coverage(result) -> float | None:
    """The close's observed coverage of the nominal 90 % interval."""
    for c in ((result.calibration_report or {}).get("fields", {}).get("close", {}).get("coverage", [])):
        if abs(c["nominal"] - LEVEL) < 1e-9:
            return c["rate"]
    return None


LABELS = ("base", "tuned", "baseline")


def evaluate(model: str, base_weights: str | None, tuned: Path, whole: list[Bars], until: date, *, context: int,
             samples: int, device: str, dtype: str, seed: int, data_dir: Path | None) -> dict:
    """Backtest base and tuned weights and the baseline on the windows after ``until``; returns the comparison,
    per symbol and pooled (run ids included when the run store is on)."""
    period = Period.of(start=until + timedelta(days=1))
    rows, crps = [], {label: [] for label in LABELS}
    runs = {}
    for label, name, weights in (("base", model, base_weights), ("tuned", model, str(tuned)),
                                 ("baseline", "baseline", None)):
        forecaster = load_forecaster(name, weights=weights, device=device, dtype=dtype, seed=seed)
        config = BacktestConfig(context=context, num_samples=samples, seed=seed)
        prepared = prepare(whole, period, config, min_context=getattr(forecaster, "min_context", 2),
                           weights=weights, model=name)  # after until: passes; labelled as a backtest's
        results = [run_many([b], forecaster, c)[0] for b, c in zip(prepared.bars, prepared.configs)]
        prepared.label(results)
        crps[label] = [window_crps(forecaster, b, c, r.windows)
                       for b, c, r in zip(prepared.bars, prepared.configs, results)]
        runs[label] = results
        from marketcast.runs.record import record_backtest  # finetune sits above runs

        runs[f"{label}_run"] = record_backtest(results, whole, {
            "model": name, "weights": weights, "device": device, "dtype": dtype, "asset_class": None,
            "data_dir": data_dir, "on_duplicate": "error", "periods_per_year": None})
    for i, b in enumerate(whole):
        three = [runs[label][i] for label in LABELS]
        base = three[0]
        rows.append({
            "symbol": b.symbol, "windows": base.windows,
            "first_decision": base.decision_times[0].isoformat(),
            "crps": tuple(r.skill["crps_close"] for r in three),
            "mase": tuple(r.skill["mase_close"] for r in three),
            "coverage90": tuple(_coverage(r) for r in three),
            "walk_forward_return": tuple(r.walk_forward["metrics"]["return"] for r in three),
            "test": paired_test(crps["base"][i], crps["tuned"][i]),
            "vs_baseline": {label: paired_test(crps["baseline"][i], crps[label][i]) for label in ("tuned", "base")},
        })
    pooled = {label: np.concatenate(crps[label]) for label in LABELS}
    return {"symbols": rows, "pooled": paired_test(pooled["base"], pooled["tuned"]),
            "pooled_vs_baseline": {label: paired_test(pooled["baseline"], pooled[label]) for label in ("tuned", "base")},
            **{f"{label}_run": runs[f"{label}_run"] for label in LABELS}, "per_window_crps": crps}


METRICS = ("crps", "mase", "coverage90", "walk_forward_return")


def evaluation_json(result: dict) -> dict:
    """The comparison for ``finetune --json``: per symbol each metric's base, tuned, baseline and tuned - base, the
    paired test on per-window CRPS of base against tuned and of the baseline against each; pooled over the symbols;
    the three run ids (None when the run store is off)."""
    def pair(b, t, baseline) -> dict:
        return {"base": b, "tuned": t, "baseline": baseline, "delta": None if b is None or t is None else t - b}

    return {"symbols": [{"symbol": r["symbol"], "windows": r["windows"], "first_decision": r["first_decision"],
                         **{m: pair(*r[m]) for m in METRICS}, "test": r["test"], "vs_baseline": r["vs_baseline"]}
                        for r in result["symbols"]],
            "pooled": result["pooled"], "pooled_vs_baseline": result["pooled_vs_baseline"],
            **{f"{label}_run": result[f"{label}_run"] for label in LABELS}}


def print_evaluation(result: dict) -> None:
    """The comparison as a table and one line for the pooled paired test."""
    from rich.table import Table

    from marketcast.console import console

    def num(x, fmt="{:.4f}"):
        return "-" if x is None else fmt.format(x)

    table = Table(title="base vs tuned vs baseline, out of sample (windows after --until)")
    for column in ("symbol", "windows", "metric", "base", "tuned", "tuned - base", "baseline"):
        table.add_column(column)
    for row in result["symbols"]:
        for metric, fmt in (("crps", "{:.5f}"), ("mase", "{:.3f}"), ("coverage90", "{:.0%}"),
                            ("walk_forward_return", "{:+.2%}")):
            b, t, baseline = row[metric]
            delta = None if b is None or t is None else t - b
            table.add_row(row["symbol"], str(row["windows"]), metric, num(b, fmt), num(t, fmt), num(delta, fmt),
                          num(baseline, fmt))
    console.print(table)
    for p, (first, second) in ((result["pooled"], ("base", "tuned")),
                               (result["pooled_vs_baseline"]["tuned"], ("baseline", "tuned")),
                               (result["pooled_vs_baseline"]["base"], ("baseline", "base"))):
        console.print(f"CRPS {first} - {second} per window: mean {num(p['mean_diff'], '{:.5f}')} "
                      f"[95% CI {num(p['ci_low'], '{:.5f}')}, {num(p['ci_high'], '{:.5f}')}], paired t p = "
                      f"{num(p['t_p'], '{:.3g}')}, Wilcoxon p = {num(p['wilcoxon_p'], '{:.3g}')} over "
                      f"{p['windows']} windows (> 0: {second} better)", highlight=False, soft_wrap=True)
    for label in LABELS:
        if result[f"{label}_run"]:
            console.print(f"{label} run {result[f'{label}_run']}", highlight=False, soft_wrap=True)
