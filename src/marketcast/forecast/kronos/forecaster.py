"""The Kronos :class:`~marketcast.forecast.base.Forecaster` and ``predict_series`` (upstream-style, samples)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from marketcast.errors import ConfigError
from marketcast.forecast.base import INPUT_FIELDS, OUTPUT_FIELDS, ContextBatch, Forecast, _extrapolate
from marketcast.forecast.kronos.decode import PathDecoder
from marketcast.forecast.kronos.layers import fuse_projections
from marketcast.forecast.kronos.model import Kronos
from marketcast.forecast.kronos.pipeline import FEATURES, KronosPipeline, time_features, with_amount
from marketcast.forecast.kronos.sampling import SamplingParams
from marketcast.forecast.kronos.tokenizer import KronosTokenizer
from marketcast.forecast.warmup import CUDA_GRAPH_RUNS, synthetic_batch, timed_warmup
from marketcast.runtime.precision import tf32


@dataclass
class SeriesPaths:
    """``predict_series`` result: ``absolute`` ``[S, H, C]`` sample paths and ``percent`` = absolute / last
    observed value of the column - 1 (a fraction; NaN where that value is 0), indexed by ``timestamps``."""

    columns: tuple[str, ...]
    timestamps: pd.DatetimeIndex
    absolute: np.ndarray
    percent: np.ndarray

    def mean(self) -> pd.DataFrame:
        """Upstream ``KronosPredictor.predict``'s output (the mean path)."""
        return pd.DataFrame(self.absolute.mean(0), columns=list(self.columns), index=self.timestamps)


class KronosForecaster:
    """Forecaster protocol for Kronos. ``memory_budget`` (bytes, None: see
    :func:`marketcast.runtime.memory.memory_budget`) sizes the chunks of windows decoded together; ``tf32``
    allows TF32 matrix multiplies for a float32 model on CUDA."""

    name = "kronos"
    fields = OUTPUT_FIELDS
    paths = "joint"  # whole bars decoded by the model (marketcast.forecast.paths)

    def __init__(self, model: Kronos, tokenizer: KronosTokenizer, *, mode: str | None = None, label: str = "kronos",
                 memory_budget: int | None = None, sampling: SamplingParams = SamplingParams(),
                 tf32: bool = False) -> None:
        self.label = label
        self.sampling = sampling
        self.tf32 = tf32
        fuse_projections(model.eval())  # in place: the forecaster owns its model and tokenizer
        fuse_projections(tokenizer.eval())
        self.decoder = PathDecoder(model, tokenizer, mode)
        self.pipeline = KronosPipeline(self.decoder, memory_budget)

    def compile_guards(self):
        return self.decoder.guards

    def warmup(self, context: int, horizon: int, num_samples: int, batch_size: int = 1) -> float:
        """Compile (and on CUDA record) every graph a ``forecast`` of ``batch_size`` windows of ``context``
        bars needs; returns the seconds it took. Later calls of those shapes never compile."""
        cuda = self.decoder.device.type == "cuda"
        runs = CUDA_GRAPH_RUNS if cuda and self.decoder.mode is not None else 1
        return timed_warmup(self.forecast, synthetic_batch(batch_size, context, horizon), horizon, num_samples,
                            runs, torch.cuda.synchronize if cuda else None)

    def _meta(self, info) -> dict:
        guards = self.decoder.guards
        return {
            "model": self.label,
            "num_samples_used": info.samples,
            "samples_per_batch_used": info.samples_per_chunk,
            "compile_mode": self.decoder.mode,
            "compiled": any(g.active and g.stats.compiled for g in guards),
            "fallback_reason": self.decoder.steps.fallback_reason,  # one bucket falling back sends all to eager
            "lookback_used": info.lookback,
            "re_prefills": info.re_prefills,
            "sampling": asdict(self.sampling),
        }

    def lookback_for(self, context: int, horizon: int) -> int:
        """Bars of a ``context``-bar window that :meth:`forecast` uses: at most ``max_context - horizon + 1``, so
        every decode step runs from the KV cache (no re-prefill), when that drops at most an eighth of the
        window; longer horizons keep ``max_context`` bars and re-prefill once the window is full."""
        window = self.decoder.window
        if horizon - 1 <= window // 8:
            return min(context, window - horizon + 1)
        return min(context, window)

    def forecast(self, batch: ContextBatch, horizon: int, num_samples: int, seed: int = 0) -> Forecast:
        if batch.timestamps is None:
            raise ConfigError("kronos needs bar timestamps (its calendar embedding); build the batch with make_batch "
                              "from a frame with a DatetimeIndex")
        future = batch.future_timestamps
        if future is None:
            future = np.stack([_extrapolate(s[m], s[-1], horizon) for s, m in zip(batch.timestamps, batch.mask)])
        if future.shape[1] < horizon:
            raise ConfigError(f"batch has {future.shape[1]} future timestamps but horizon is {horizon}")
        keep = self.lookback_for(batch.length, horizon)
        x = with_amount(batch.values[:, -keep:])
        with tf32(self.tf32, self.decoder.device):
            paths, info = self.pipeline.sample_paths(
                x, batch.mask[:, -keep:], time_features(batch.timestamps[:, -keep:]),
                time_features(future[:, :horizon]), num_samples, self.sampling, seed, batch.window_keys())
        samples = np.stack([paths[..., FEATURES.index(f)] for f in self.fields], axis=1)  # [B, F, S, H]
        return Forecast(samples=samples, fields=self.fields, meta=self._meta(info))

    def predict_series(self, df: pd.DataFrame, columns: Sequence[str] = ("open", "high", "low", "close"),
                       pred_len: int = 16, lookback: int = 400, temperature: float = 1.0, top_p: float = 0.9,
                       top_k: int = 0, sample_count: int = 1, seed: int = 0,
                       future_timestamps: Sequence | None = None) -> SeriesPaths:
        """Upstream ``KronosPredictor.predict`` on the last ``lookback`` rows of ``df`` (DatetimeIndex or a
        ``timestamps`` column), returning every sample path; ``columns`` picks the output columns."""
        bad = [c for c in columns if c not in FEATURES]
        if bad:
            raise ConfigError(f"predict_series columns {bad} unknown; choose from {', '.join(FEATURES)}")
        missing = [c for c in INPUT_FIELDS[:4] if c not in df.columns]
        if missing:
            raise ConfigError(f"predict_series needs price columns {missing}")
        if "timestamps" not in df.columns and not isinstance(df.index, pd.DatetimeIndex):
            raise ConfigError("predict_series needs a DatetimeIndex or a 'timestamps' column (calendar embedding)")
        df = df.iloc[-lookback:].copy()
        stamps = pd.DatetimeIndex(df["timestamps"] if "timestamps" in df.columns else df.index)
        if stamps.tz is not None:
            stamps = stamps.tz_convert("UTC").tz_localize(None)
        if "volume" not in df.columns:
            df["volume"], df["amount"] = 0.0, 0.0
        x = with_amount(df[list(INPUT_FIELDS)].to_numpy(np.float64))
        if "amount" in df.columns:
            x[:, 5] = df["amount"].to_numpy(np.float64)
        if np.isnan(x).any():
            raise ConfigError("predict_series input contains NaN in price/volume/amount columns")
        stamp_values = stamps.to_numpy("datetime64[ns]")
        future = (np.asarray(future_timestamps, dtype="datetime64[ns]") if future_timestamps is not None
                  else _extrapolate(stamp_values, stamp_values[-1], pred_len))
        params = SamplingParams(temperature, top_k, top_p)
        key = stamp_values[-1:].astype("int64").astype(np.uint64)  # the window's identity, as in forecast
        with tf32(self.tf32, self.decoder.device):
            paths, _ = self.pipeline.sample_paths(x[None], np.ones((1, len(x)), bool), time_features(stamp_values)[None],
                                                  time_features(future[:pred_len])[None], sample_count, params, seed,
                                                  key)
        pick = [FEATURES.index(c) for c in columns]
        absolute = paths[0][..., pick]
        last = x[-1, pick]
        with np.errstate(divide="ignore", invalid="ignore"):
            percent = np.where(last != 0, absolute / np.where(last != 0, last, 1.0) - 1.0, np.nan)
        return SeriesPaths(tuple(columns), pd.DatetimeIndex(future[:pred_len]), absolute, percent)


def resolve_mode(compile: str | None, device: str) -> str | None:
    """``None`` -> the compile settings for kronos on ``device``; ``"eager"`` -> off; else a torch.compile mode."""
    from marketcast.runtime.compile_settings import MODES, load_settings

    if compile is None:
        return load_settings().mode_for("kronos", device)
    if compile == "eager":
        return None
    if compile not in MODES:
        raise ConfigError(f"kronos compile={compile!r} is not a mode; use eager or one of {', '.join(MODES)}")
    return compile


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def create(*, weights: str | None = None, device: str = "cpu", dtype: str = "float32", compile: str | None = None,
           seed: int = 0) -> KronosForecaster:
    """Registry factory (see :mod:`marketcast.forecast.registry`); the tokenizer always runs in float32."""
    from marketcast.forecast.kronos.loading import load_pair

    if dtype not in DTYPES:
        raise ConfigError(f"kronos dtype={dtype!r} unsupported; use one of {', '.join(DTYPES)}")
    mode = resolve_mode(compile, device)
    model, tokenizer, label = load_pair(weights, seed, device)
    model = model.to(device=device, dtype=DTYPES[dtype])
    tokenizer = tokenizer.to(device=device)
    return KronosForecaster(model, tokenizer, mode=mode, label=label)
