"""Run the same windows through each model and turn the backtest results into leaderboard rows.

A row's numbers are read from the backtest's own results (``symbol_json``, the walk-forward record and the
calibration report), averaged over the symbols, so a one-symbol row equals ``marketcast backtest --model X
--strategies`` :data:`~marketcast.backtest.strategies.FORECAST_DRIVEN` over the same windows. The cost columns
are measured around the model's load and its ``run_many`` call.

The trading columns rank what each model's forecasts trade: the walk-forward pick among the forecast-driven
strategies only. A forecast-blind strategy (``buy_hold``) trades the same orders whatever the model, so where it
was the pick two models as far apart as the baseline and random weights showed one trading row. Buy and hold
is shown once, as the benchmark row (:func:`benchmark_row`), and each model's row says what the rule picked in
most windows (``most_picked``, :func:`pick_summary`) and, where its record cannot tell it from another model's,
why.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.engine import SymbolResult, run_many
from marketcast.backtest.fans import add_fans
from marketcast.backtest.strategies import STRATEGIES
from marketcast.data.bars import Bars
from marketcast.errors import ConfigError
from marketcast.forecast.exposure import Exposure
from marketcast.forecast.paths import paths_of
from marketcast.forecast.registry import MODEL_NAMES, installed, load_forecaster, missing

MB = 2**20
FLAT = "flat"  # a window with no pick: no strategy had the rule's min_trades in its lookback


def parse_models(text: str) -> list[str]:
    """``--models baseline,toto2`` -> the names, checked against the registry (one line, exit 2 otherwise)."""
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    if not names:
        raise ConfigError("--models is empty; give a comma-separated list, e.g. --models baseline,toto2")
    unknown = [n for n in names if n not in MODEL_NAMES]
    if unknown:
        raise ConfigError(f"--models: unknown model {unknown[0]!r}; choose from {', '.join(MODEL_NAMES)}")
    if len(set(names)) != len(names):
        raise ConfigError(f"--models names a model twice ({text}); list each once")
    return names


def default_models() -> str:
    """``--models``'s default: every model whose optional extra is installed (their weights are checked as any
    chosen model's, :func:`check_models`)."""
    return ",".join(n for n in MODEL_NAMES if installed(n))


def check_models(names: Sequence[str], weights: dict[str, str], skip_missing: bool = False) -> list[dict]:
    """Every model checked before any runs (:func:`marketcast.forecast.registry.missing`: its extra installed,
    its weights found by its loader's own resolution, nothing loaded). One missing model ends the command with
    its loader's line (exit 2); several: a warning line each, in its loader's words, then one line naming each.
    With ``skip_missing`` the others go on, and the skipped ones are returned ({model, reason}) for the table,
    the JSON and the page to say."""
    skipped = [{"model": n, "reason": why} for n in names if (why := missing(n, weights.get(n))) is not None]
    if not skipped:
        return []
    import warnings

    if skip_missing or len(skipped) > 1:
        for s in skipped:
            warnings.warn(f"{s['model']}: {s['reason']}", stacklevel=2)
    if not skip_missing:
        if len(skipped) == 1:
            raise ConfigError(f"{skipped[0]['model']}: {skipped[0]['reason']}; or pass --skip-missing to compare "
                              "the other models")
        said = "; ".join(f"{s['model']}: {'no weights here' if installed(s['model']) else 'its extra is not installed'}"
                         for s in skipped)
        raise ConfigError(f"{len(skipped)} of {len(names)} models cannot run here ({said}; each said above); "
                          "install or download them, or pass --skip-missing to compare the others")
    if len(skipped) == len(names):
        raise ConfigError(f"none of the {len(names)} models can run here (each said above); install or download "
                          "one of them, or add --models baseline")
    return skipped


def parse_weights(values: Sequence[str] | None, models: Sequence[str]) -> dict[str, str]:
    """``--weights toto2=random:4m`` (repeatable) -> {model: weights}; the model must be one of ``--models``."""
    found: dict[str, str] = {}
    for value in values or []:
        model, sep, weights = value.partition("=")
        model, weights = model.strip().lower(), weights.strip()
        if not sep or not weights:
            raise ConfigError(f"--weights {value!r}: give MODEL=WEIGHTS, e.g. --weights toto2=random:4m")
        if model not in models:
            raise ConfigError(f"--weights {value!r}: {model!r} is not in --models ({', '.join(models)}); add it "
                              "there or drop this --weights")
        found[model] = weights
    return found


def is_random(weights: str | None, source: str | None) -> bool:
    """Randomly initialised weights: their forecasts mean nothing, so the leaderboard flags them."""
    return any(str(v).lower().startswith("random") for v in (weights, source) if v)


def _rss() -> int:
    """Resident memory of this process now, in bytes (Linux /proc; elsewhere the peak so far)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class PeakMemory:
    """The peak resident memory while the block runs (sampled every ``interval`` s), or on a CUDA device the
    peak allocated by torch (``torch.cuda.max_memory_allocated``, reset on entry)."""

    def __init__(self, device: str, interval: float = 0.01) -> None:
        self.cuda = str(device).startswith("cuda")
        self.interval, self.peak = interval, 0
        self._stop = threading.Event()

    @property
    def kind(self) -> str:
        return "cuda" if self.cuda else "rss"

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, _rss())

    def __enter__(self) -> "PeakMemory":
        if self.cuda:
            import torch

            torch.cuda.reset_peak_memory_stats()
        else:
            self.peak = _rss()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.cuda:
            import torch

            self.peak = int(torch.cuda.max_memory_allocated())
        else:
            self._stop.set()
            self._thread.join()
            self.peak = max(self.peak, _rss())


@dataclass
class ModelRun:
    """One model over every symbol: the backtest results and what running it cost."""

    model: str
    weights: str | None
    source: str | None
    device: str
    dtype: str
    results: list[SymbolResult]
    load_s: float
    run_s: float
    peak_memory: int
    memory_kind: str
    extra: dict = field(default_factory=dict)
    paths: str = "joint"  # joint samples, or "copula" (marketcast.forecast.paths)
    warmup_s: float = 0.0  # the warm-up call before run_s's clock (first call, compile)

    @property
    def random_weights(self) -> bool:
        return is_random(self.weights, self.source)

    @property
    def windows(self) -> int:
        return sum(r.windows for r in self.results)


def weigh_models(weights: dict[str, str], names: Sequence[str], bars: Sequence[Bars], config: BacktestConfig,
                 require_clean: bool = False) -> dict[str, Exposure]:
    """What each model's weights may have seen of the windows every backtest prepares
    (:func:`marketcast.backtest.prepare.prepare`), checked for every model before any runs: fine-tuned weights are
    never ranked on the bars they were tuned on (:mod:`marketcast.forecast.tuning`), and ``require_clean`` refuses
    any window a label would mark (:mod:`marketcast.forecast.exposure`)."""
    from marketcast.backtest.period import Period
    from marketcast.backtest.prepare import prepare

    return {model: prepare(bars, Period(config.windows), config, weights=weights.get(model), model=model,
                           require_clean=require_clean,
                           fix="rank them on symbols they were not tuned on, or on bars from {start} on").exposure
            for model in names}


def warm_up(forecaster, config: BacktestConfig) -> None:
    """One forecast of a synthetic window of the backtest's context before the clock starts: the first call
    (lazy initialisation, a compiled model's first graph) is paid here, not in windows/s, which would otherwise
    penalise compiled models more the fewer windows are compared."""
    from marketcast.forecast.warmup import synthetic_batch

    forecaster.forecast(synthetic_batch(1, config.context, 1, seed=config.seed), horizon=1,
                        num_samples=config.num_samples, seed=config.seed)


def run_model(model: str, bars: Sequence[Bars], config: BacktestConfig, *, weights: str | None, device: str,
              dtype: str, step: Callable[[str], None] | None = None,
              clock: Callable[[], float] = time.perf_counter, exposure: Exposure = Exposure()) -> ModelRun:
    """Load ``model``, warm it up (:func:`warm_up`) and backtest every symbol with ``config`` (one batched
    :func:`run_many`, as the backtest command does for symbols of equal window counts); ``run_s`` times only
    the backtest, ``warmup_s`` the warm-up call. Each result carries ``exposure``'s labels (:func:`weigh_models`),
    as the backtest's do."""
    device = "cpu" if model == "baseline" else device  # the baseline always runs on the CPU
    with PeakMemory(device) as memory:
        started = clock()
        forecaster = load_forecaster(model, weights=weights, device=device, dtype=dtype, seed=config.seed)
        loaded = clock()
        warm_up(forecaster, config)
        warm = clock()
        results = run_many(list(bars), forecaster, config, on_step=step)
        ran = clock()
    add_fans(results, bars, forecaster)  # stored with the run (`report RUN` draws them), outside the measures
    frames = {b.symbol.upper(): b.frame for b in bars}
    for r in results:
        r.forecast_meta = {**r.forecast_meta, **exposure.meta(r.symbol, r.decision_times, frames.get(r.symbol.upper()))}
    return ModelRun(model=model, weights=weights, source=getattr(forecaster, "source", None), device=device,
                    dtype=dtype, results=results, load_s=loaded - started, run_s=ran - warm,
                    peak_memory=memory.peak, memory_kind=memory.kind, warmup_s=warm - loaded,
                    paths=paths_of(forecaster))


def pretraining_split(results: Sequence[SymbolResult]) -> dict | None:
    """The walk-forward record split at the checkpoint's pretraining boundary (a dual-period audit): for the
    windows whose decision bar is on or before it and those after, their number, compounded return and Sharpe
    (:func:`marketcast.backtest.metrics.sharpe_ratio`), means over the symbols; None without a dated card."""
    from marketcast.backtest.metrics import sharpe_ratio

    metas = [r.forecast_meta for r in results if "pretraining_until" in r.forecast_meta]
    if not metas:
        return None
    until = pd.Timestamp(metas[0]["pretraining_until"]).date()
    sides: dict[str, list[dict]] = {"before": [], "after": []}
    for r in results:
        days = np.asarray(pd.DatetimeIndex(r.decision_times).date)
        returns = np.asarray(r.walk_forward["returns"], dtype=np.float64)
        for side, mask in (("before", days <= until), ("after", days > until)):
            part = returns[mask]
            if part.size:
                sides[side].append({"windows": int(part.size), "return": float(np.prod(1.0 + part) - 1.0),
                                    "sharpe": sharpe_ratio(part, r.periods_per_year)})
    label = next((m["pretraining"] for m in metas if m["pretraining"]), "")
    return {"checkpoint": metas[0]["checkpoint"], "label": label, "until": metas[0]["pretraining_until"],
            **{side: {"windows": sum(p["windows"] for p in parts),
                      "return": _mean(parts, "return") if parts else None,
                      "sharpe": _mean(parts, "sharpe") if parts else None} for side, parts in sides.items()}}


def _num(value) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


def symbol_row(result: SymbolResult) -> dict:
    """Skill and trading numbers of one symbol, read from the backtest's own reports: MASE and CRPS of the
    close (:mod:`marketcast.backtest.skill`), the close's 80 % interval coverage (:mod:`marketcast.calibrate`),
    the walk-forward record's Sharpe with its bootstrap CI, deflated Sharpe (Bailey & Lopez de Prado 2014),
    max drawdown (negative) and trades."""
    from marketcast.backtest.report import symbol_json
    from marketcast.calibrate.summary import store_columns

    doc = symbol_json(result)
    metrics, wf = doc["metrics"], result.walk_forward["metrics"]
    calibration = store_columns(result.calibration_report) if result.calibration_report else {}
    drawdown = _num(wf.get("max_drawdown"))
    return {
        "symbol": result.symbol, "windows": result.windows,
        "mase": _num(metrics.get("mase")), "crps": _num(metrics.get("crps")),
        "coverage80": _num(calibration.get("calibration.close.cov80")),
        "sharpe": _num(wf.get("sharpe")), "sharpe_ci_low": _num(wf.get("sharpe_ci_low")),
        "sharpe_ci_high": _num(wf.get("sharpe_ci_high")),
        "dsr": _num((doc.get("selection") or {}).get("dsr_walk_forward")),
        "max_drawdown": None if drawdown is None else 0.0 - abs(drawdown),
        "trades": int(wf.get("trades") or 0),
    }


def _mean(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if r[key] is not None]
    return float(np.mean(values)) if values else None


def pick_summary(results: Sequence[SymbolResult]) -> dict:
    """What the walk-forward rule picked over every window of every symbol: the most-picked ``strategy`` (ties:
    listing order; None when flat throughout) and its ``share`` of the windows, every pick's share (``flat``:
    no pick), whether the most-picked strategy is forecast-blind, and a ``note`` saying why the record cannot
    tell this model from another (here: flat throughout; :func:`model_rows` adds identical trades)."""
    picks = [p for r in results for p in r.walk_forward["picked"]]
    if not picks:
        return {"strategy": None, "share": None, "shares": {}, "forecast_blind": False, "note": None}
    counts = Counter(FLAT if p is None else p for p in picks)
    order = list(STRATEGIES) + [FLAT]
    picked = sorted((n for n in counts if n != FLAT), key=lambda n: (-counts[n], order.index(n)))
    top = picked[0] if picked else None
    rule = results[0].config.selection
    span = "every settled window" if rule.lookback is None else f"its last {rule.lookback} windows"
    return {"strategy": top, "share": None if top is None else counts[top] / len(picks),
            "shares": {n: counts[n] / len(picks) for n in sorted(counts, key=lambda n: (-counts[n], order.index(n)))},
            "forecast_blind": top is not None and not STRATEGIES[top].reads_forecast,
            "note": None if top else f"flat in every window: no forecast-driven strategy had {rule.min_trades} "
                                     f"trades in {span}"}


def model_row(run: ModelRun) -> dict:
    """The leaderboard row of one model: skill and trading averaged over the symbols (max drawdown: the worst,
    trades: the sum), what the walk-forward rule picked, its cost, and where its weights came from."""
    per_symbol = [symbol_row(r) for r in run.results]
    drawdowns = [r["max_drawdown"] for r in per_symbol if r["max_drawdown"] is not None]
    trades = sum(r["trades"] for r in per_symbol)
    measured = ("sharpe", "sharpe_ci_low", "sharpe_ci_high", "dsr") if trades else ()  # 0 trades: nothing measured
    return {
        "model": run.model, "weights": run.weights,
        "weights_source": run.source or run.weights or ("none" if run.model == "baseline" else "auto"),
        "random_weights": run.random_weights, "paths": run.paths,
        "skill": {k: _mean(per_symbol, k) for k in ("mase", "crps", "coverage80")},
        "trading": {**{k: _mean(per_symbol, k) if k in measured else None
                       for k in ("sharpe", "sharpe_ci_low", "sharpe_ci_high", "dsr")},
                    "max_drawdown": min(drawdowns) if drawdowns else None, "trades": trades},
        "most_picked": pick_summary(run.results),
        "cost": {"windows": run.windows, "windows_per_s": run.windows / run.run_s if run.run_s > 0 else None,
                 "load_s": run.load_s, "warmup_s": run.warmup_s, "run_s": run.run_s, "peak_memory_mb": run.peak_memory / MB,
                 "memory_kind": run.memory_kind, "device": run.device, "dtype": run.dtype},
        "symbols": per_symbol,
        "pretraining": pretraining_split(run.results),
    }


def same_trades(a: ModelRun, b: ModelRun) -> bool:
    """Whether two models' walk-forward records are the same trades: equal returns in every window."""
    return len(a.results) == len(b.results) and all(
        np.array_equal(x.walk_forward["returns"], y.walk_forward["returns"])
        and np.array_equal(x.walk_forward["filled"], y.walk_forward["filled"]) for x, y in zip(a.results, b.results))


def model_rows(runs: Sequence[ModelRun]) -> list[dict]:
    """:func:`model_row` of each run; a row whose record trades exactly what another model's does (and is not
    flat throughout, already said) names those models in its most picked's ``note``: their forecasts differ, but
    not in any order the rule traded."""
    rows = [model_row(run) for run in runs]
    for run, row in zip(runs, rows):
        twins = [other.model for other in runs if other is not run and same_trades(run, other)]
        if twins and row["most_picked"]["note"] is None:
            row["most_picked"]["note"] = (f"the same trades as {', '.join(twins)} in every window: the forecasts differ, "
                                   "the orders the rule traded do not")
    return rows


def benchmark_row(results: Sequence[SymbolResult]) -> dict:
    """Buy and hold (:mod:`marketcast.backtest.benchmark`) over the same windows, shown once: it reads no
    forecast, so it is the same for every model. Its trading numbers as a model row's (means over the symbols;
    max drawdown: the worst; trades: the sum); no DSR, as nothing was selected."""
    from marketcast.backtest.benchmark import DESCRIPTION, NAME
    from marketcast.backtest.report import signed_drawdown

    per_symbol = []
    for r in results:
        m = signed_drawdown(r.benchmark.metrics)
        per_symbol.append({"symbol": r.symbol, "windows": r.windows, "sharpe": _num(m.get("sharpe")),
                           "sharpe_ci_low": _num(m.get("sharpe_ci_low")),
                           "sharpe_ci_high": _num(m.get("sharpe_ci_high")), "dsr": None,
                           "max_drawdown": _num(m.get("max_drawdown")), "trades": int(m.get("trades") or 0)})
    drawdowns = [r["max_drawdown"] for r in per_symbol if r["max_drawdown"] is not None]
    return {"name": NAME, "description": DESCRIPTION,
            "trading": {**{k: _mean(per_symbol, k) for k in ("sharpe", "sharpe_ci_low", "sharpe_ci_high")},
                        "dsr": None, "max_drawdown": min(drawdowns) if drawdowns else None,
                        "trades": sum(r["trades"] for r in per_symbol)},
            "symbols": per_symbol}
