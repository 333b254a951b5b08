"""The weight-free default forecaster: filtered historical simulation of whole bars.

Each sample step draws one past bar of the window (uniformly from the last ``lookback`` bars) and replays
its gap, high, low and close moves relative to the previous close, rescaled by the ratio of today's EWMA
volatility to the volatility on that day (RiskMetrics lambda 0.94). Replaying whole bars keeps every
path's high >= max(open, close) and low <= min(open, close); the volatility filter makes the spread react to
the current regime. It reads nothing but the window, is deterministic given the seed, and forecasts all
windows of a batch in one vectorised call.

Each window draws from its own random stream keyed by (seed, the window's last timestamp), so a window's
paths do not depend on which other windows share the batch: the live loop's forecast for day t equals the
backtest's. Windows of different symbols ending on the same day replay the same historical days, as
historical-simulation risk models do.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from marketcast.errors import ConfigError
from marketcast.forecast.base import INPUT_FIELDS, ContextBatch, Forecast
from marketcast.forecast.warmup import synthetic_batch, timed_warmup

_O, _H, _L, _C = (INPUT_FIELDS.index(f) for f in ("open", "high", "low", "close"))


@dataclass
class BaselineForecaster:
    """Bootstrap of recent bars with EWMA volatility scaling (see module docstring)."""

    lookback: int = 250
    ewma_lambda: float = 0.94
    max_vol_ratio: float = 4.0
    name: str = "baseline"
    paths = "joint"  # whole past bars replayed (marketcast.forecast.paths); a class attribute, not a field
    fields: tuple[str, ...] = ("close", "high", "low", "open")
    min_context: int = 3  # real bars a window needs: two moves to start the volatility estimate

    def _moves(self, batch: ContextBatch) -> tuple[np.ndarray, np.ndarray]:
        """Per-bar log moves ``[B, T-1, 4]`` (close, high, low, open vs previous close), vol-rescaled."""
        v = batch.values
        prev_close = v[:, :-1, _C]
        moves = np.log(v[:, 1:, [_C, _H, _L, _O]] / prev_close[:, :, None])
        valid = batch.mask[:, 1:] & batch.mask[:, :-1]
        r = np.where(valid, moves[:, :, 0], 0.0)
        counts = valid.sum(axis=1)
        if (counts < self.min_context - 1).any():
            raise ConfigError(f"baseline forecaster needs at least {self.min_context} real bars per window; "
                              "give it more context")
        var = (r**2).sum(axis=1) / counts  # start the EWMA at the window's own mean square
        sigma_before = np.empty_like(r)  # volatility forecast made before each bar
        lam = self.ewma_lambda
        for j in range(r.shape[1]):
            sigma_before[:, j] = np.sqrt(var)
            var = np.where(valid[:, j], lam * var + (1 - lam) * r[:, j] ** 2, var)
        sigma_now = np.sqrt(var)
        ratio = np.clip(sigma_now[:, None] / np.maximum(sigma_before, 1e-12), 1 / self.max_vol_ratio,
                        self.max_vol_ratio)
        return moves * ratio[:, :, None], counts

    def forecast(self, batch: ContextBatch, horizon: int, num_samples: int, seed: int = 0) -> Forecast:
        if horizon < 1 or num_samples < 1:
            raise ConfigError(f"horizon and num_samples must be >= 1, got {horizon} and {num_samples}")
        started = time.perf_counter()
        moves, counts = self._moves(batch)
        b, steps = moves.shape[0], moves.shape[1]
        span = np.minimum(counts, self.lookback)
        draws = np.stack([np.random.default_rng([seed, key]).random((num_samples, horizon))
                          for key in batch.window_keys()])
        back = (draws * span[:, None, None]).astype(np.int64)
        picked = moves[np.arange(b)[:, None, None], steps - 1 - back]  # [B, S, H, 4]
        log_close = np.cumsum(picked[..., 0], axis=-1)
        prev = np.concatenate([np.zeros((b, num_samples, 1)), log_close[..., :-1]], axis=-1)
        base = np.log(batch.last_close())[:, None, None]
        close = np.exp(base + log_close)
        high, low, open_ = (np.exp(base + prev + picked[..., k]) for k in (1, 2, 3))
        samples = np.stack([close, high, low, open_], axis=1)  # [B, 4, S, H]
        meta = {
            "model": self.name,
            "num_samples_used": num_samples,
            "samples_per_batch_used": num_samples,
            "compile_mode": None,
            "compiled": False,
            "fallback_reason": None,
            "latency_s": time.perf_counter() - started,
        }
        return Forecast(samples=samples, fields=self.fields, meta=meta)

    def warmup(self, context: int, horizon: int, num_samples: int, batch_size: int = 1) -> float:
        """One forecast of the loop's shapes, timed (nothing to compile: it pages numpy in); as the models'."""
        return timed_warmup(self.forecast, synthetic_batch(batch_size, context, horizon), horizon, num_samples, 1)


def create(*, weights=None, device="cpu", dtype="float32", compile=None, seed=0) -> BaselineForecaster:
    """Registry factory; the baseline has no weights, device or compile mode."""
    if weights not in (None, "auto"):
        raise ConfigError(f"the baseline forecaster has no weights (got --weights {weights}); drop the option")
    return BaselineForecaster()

