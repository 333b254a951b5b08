"""The model the loop trades with: the first of the configured chain (``toto,kronos,baseline``) that loads and
warms up, ready before the first decision.

Warm-up pays the first forecast's cost (weights to the device, torch.compile for the loop's shape: one window
of ``context`` bars, ``num_samples`` paths, horizon 1, as every cycle after the first forecasts) before the loop
decides anything, timed and recorded. A forecaster with its own ``warmup`` method is asked to warm up instead,
with whichever of (batch, horizon, num_samples, seed, context) it takes. A model that fails to load or warm up
is logged, recorded and skipped; when every one fails, the run ends with the failures listed (exit 2).
"""

from __future__ import annotations

import inspect
import logging
import time
from dataclasses import dataclass, field

from marketcast.backtest.config import BacktestConfig
from marketcast.data.bars import Bars
from marketcast.errors import MarketcastError, ModelLoadError, first_line
from marketcast.forecast import load_forecaster
from marketcast.forecast.base import make_batch
from marketcast.runtime.compile_note import first_call

log = logging.getLogger("marketcast.trade")

# What a model can fail with while loading or on its first forecast: our own errors, a missing package, a file
# or network problem, torch (CUDA out of memory, a compile failure is a RuntimeError), bad shapes.
LOAD_FAILURES = (MarketcastError, ImportError, OSError, RuntimeError, ValueError)


@dataclass
class Loaded:
    forecaster: object
    warmup: dict | None  # model, seconds, shape, how
    skipped: list[dict] = field(default_factory=list)  # {"model", "error"} of each model that failed first


def warm_up(forecaster, bars: Bars, config: BacktestConfig) -> dict:
    """Run the loop's forecast shape once on the last window of ``bars``; what it took."""
    context = min(config.context, len(bars.frame))
    batch = make_batch(bars.frame, [len(bars.frame) - 1], context, horizon=1, calendar=bars.calendar)
    args = {"batch": batch, "horizon": 1, "num_samples": config.num_samples, "seed": config.seed,
            "context": context}
    hook = getattr(forecaster, "warmup", None)
    started = time.perf_counter()
    if callable(hook):
        accepted = inspect.signature(hook).parameters
        _, note = first_call(forecaster, lambda: hook(**{k: v for k, v in args.items() if k in accepted}))
    else:
        _, note = first_call(forecaster, lambda: forecaster.forecast(batch, horizon=1, num_samples=config.num_samples,
                                                                     seed=config.seed))
    seconds = time.perf_counter() - started
    name = getattr(forecaster, "name", type(forecaster).__name__)
    shape = f"1 window x {context} bars, {config.num_samples} samples, horizon 1"
    log.info("warm-up: %s took %.2f s (%s)", name, seconds, shape)
    if note is not None:
        log.info("warm-up: %s", note.line())
    return {"model": name, "seconds": round(seconds, 4), "shape": shape,
            "how": "its warmup()" if callable(hook) else "one forecast",
            **({"compile": note.to_json()} if note is not None else {})}


def load_model(chain: tuple[str, ...], bars: Bars | None, config: BacktestConfig, *, weights: str | None = None,
               device: str = "cpu", dtype: str = "float32", seed: int = 0) -> Loaded:
    """The first model of ``chain`` that loads and (given ``bars``) warms up."""
    skipped: list[dict] = []
    for i, name in enumerate(chain):
        try:
            # --weights names the neural models' checkpoint; the baseline has none and refuses one
            forecaster = load_forecaster(name, weights=None if name == "baseline" else weights, device=device,
                                         dtype=dtype, seed=seed)
            return Loaded(forecaster, None if bars is None else warm_up(forecaster, bars, config), skipped)
        except LOAD_FAILURES as exc:
            if len(chain) == 1:
                raise
            reason = f"{type(exc).__name__}: {first_line(exc)}"
            skipped.append({"model": name, "error": reason})
            after = f"; trying {chain[i + 1]}" if i + 1 < len(chain) else ""
            log.warning("model %s skipped, it could not load or warm up (%s)%s", name, reason, after)
    raise ModelLoadError("no model of the chain " + ",".join(chain) + " could be used: "
                         + "; ".join(f"{s['model']}: {s['error']}" for s in skipped))
