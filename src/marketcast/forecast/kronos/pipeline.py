"""Bars in, sample paths out: upstream KronosPredictor's preprocessing around the path decoder.

Per series: OHLCV + amount (amount = volume x mean(OHLC) when absent, as upstream), z-scored over the real
(unpadded) bars with ``(x - mean) / (std + 1e-5)``, clipped to +-5; windows are decoded in chunks sized from
a memory budget (all ``sample_count`` paths of a window in the same chunk, sharing its prefill), then
de-normalised. Unlike upstream's ``predict`` the sample paths are returned, not their mean.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from marketcast.errors import ConfigError
from marketcast.forecast.kronos.decode import PathDecoder, context_bucket
from marketcast.forecast.kronos.plan import chunk_windows, slide_row_bytes, window_bytes
from marketcast.forecast.kronos.sampling import SamplingParams
from marketcast.runtime.memory import memory_budget, units_in, with_oom_backoff
from marketcast.runtime.rng import window_streams
from marketcast.runtime.shapes import pow2_at_least
from marketcast.runtime.transfer import HostSink

log = logging.getLogger("marketcast.kronos")
FEATURES = ("open", "high", "low", "close", "volume", "amount")
CLIP = 5.0


def time_features(stamps: np.ndarray) -> np.ndarray:
    """``datetime64`` ``[...]`` -> int64 ``[..., 5]`` minute, hour, weekday (Mon = 0), day, month."""
    idx = pd.DatetimeIndex(np.asarray(stamps, dtype="datetime64[ns]").ravel())
    out = np.stack([idx.minute, idx.hour, idx.weekday, idx.day, idx.month], axis=-1).astype(np.int64)
    return out.reshape(*np.shape(stamps), 5)


def with_amount(ohlcv: np.ndarray) -> np.ndarray:
    """``[..., 5]`` OHLCV -> ``[..., 6]`` with amount = volume x mean(OHLC) (upstream's fill)."""
    amount = ohlcv[..., 4] * ohlcv[..., :4].mean(-1)
    return np.concatenate([ohlcv, amount[..., None]], axis=-1)


def normalise(x: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float32 z-score per series over valid bars: (normalised & clipped ``[B, T, 6]``, mean, std)."""
    x = x.astype(np.float32)
    w = valid[..., None].astype(np.float32)
    count = w.sum(1, keepdims=True)
    mean = (x * w).sum(1, keepdims=True) / count
    std = np.sqrt((((x - mean) * w) ** 2).sum(1, keepdims=True) / count)
    return np.clip((x - mean) / (std + 1e-5), -CLIP, CLIP), mean, std


@dataclass
class PathInfo:
    samples: int  # paths per window actually drawn (after any out-of-memory backoff)
    samples_per_chunk: int  # paths decoded together in one call: windows per chunk x paths per window
    chunks: int
    re_prefills: int
    lookback: int


MIN_SAMPLES = 8  # out-of-memory floor for the sample count


class KronosPipeline:
    def __init__(self, decoder: PathDecoder, memory_budget: int | None = None) -> None:
        self.decoder, self.memory_budget = decoder, memory_budget

    @property
    def device(self) -> torch.device:
        return self.decoder.device

    def sample_paths(self, x: np.ndarray, valid: np.ndarray, x_time: np.ndarray, y_time: np.ndarray,
                     sample_count: int, params: SamplingParams, seed: int, keys: np.ndarray) -> tuple[np.ndarray, PathInfo]:
        """``x`` ``[B, T, 6]`` bars, ``valid`` ``[B, T]``, ``x_time``/``y_time`` ``[B, T|H, 5]`` calendar features,
        ``keys`` ``[B]`` the windows' identities (random streams) -> absolute paths ``[B, S, H, 6]`` (float64)."""
        window = self.decoder.window
        x, valid, x_time = x[:, -window:], valid[:, -window:], x_time[:, -window:]
        if not valid[:, -1].all():
            raise ValueError("every window must end with a real bar (padding goes on the left)")
        norm, mean, std = normalise(x, valid)
        z, info = self.sample_normalised(norm, valid, x_time, y_time, sample_count, params,
                                         window_streams(seed, keys))
        return z * (std[:, None].astype(np.float64) + 1e-5) + mean[:, None], info

    def sample_normalised(self, norm: np.ndarray, valid: np.ndarray, x_time: np.ndarray, y_time: np.ndarray,
                          sample_count: int, params: SamplingParams,
                          streams: torch.Tensor) -> tuple[np.ndarray, PathInfo]:
        """Normalised bars ``[B, T, 6]`` -> normalised paths ``[B, S, H, 6]`` (float64), with out-of-memory backoff."""
        horizon, window = y_time.shape[1], self.decoder.window
        if horizon > window:
            raise ConfigError(f"kronos horizon {horizon} exceeds its max_context {window}; forecast at most {window} "
                              "bars ahead")
        model, tok = self.decoder.model, self.decoder.tokenizer
        itemsize = model.head.proj_s1.weight.element_size()
        length = context_bucket(norm.shape[1], window)
        floor = window_bytes(model.config, tok.config, length, pow2_at_least(MIN_SAMPLES), pow2_at_least(horizon),
                             itemsize)

        def run(budget: int, samples: int) -> tuple[np.ndarray, PathInfo]:
            return self._decode_all(norm, valid, x_time, y_time, samples, params, streams, budget, length)

        return with_oom_backoff(run, max(floor, memory_budget(self.device, self.memory_budget)), sample_count,
                                min_budget=floor, min_samples=MIN_SAMPLES, log=log, name="kronos")

    def _decode_all(self, norm, valid, x_time, y_time, samples: int, params: SamplingParams, streams: torch.Tensor,
                    budget: int, length: int) -> tuple[np.ndarray, PathInfo]:
        b, t, _ = norm.shape
        horizon = y_time.shape[1]
        bucket, slots = pow2_at_least(samples), pow2_at_least(horizon)
        model = self.decoder.model
        itemsize = model.head.proj_s1.weight.element_size()
        chunk = chunk_windows(model.config, self.decoder.tokenizer.config, windows=b, length=length, samples=bucket,
                              slots=slots, itemsize=itemsize, budget=budget)
        slide_rows = units_in(budget, slide_row_bytes(model.config, itemsize), chunk * bucket)
        pad = length - t
        dev = self.device
        out = np.empty((b, samples, horizon, norm.shape[-1]), dtype=np.float64)
        sink = HostSink(out, dev)
        re_prefills = chunks = 0
        for start in range(0, b, chunk):
            n = min(chunk, b - start)
            rows = pow2_at_least(n)
            pick = np.minimum(np.arange(start, start + rows), start + n - 1)
            pick[n:] = start  # bucket padding rows: copies of the chunk's first window, discarded
            x = np.zeros((rows, length, norm.shape[-1]), dtype=np.float32)
            ok = np.zeros((rows, length), dtype=bool)
            x[:, pad:], ok[:, pad:] = norm[pick], valid[pick]
            stamps = np.concatenate([np.repeat(x_time[pick, :1], pad, axis=1), x_time[pick], y_time[pick]], axis=1)
            decoded = self.decoder.decode(torch.as_tensor(x, device=dev), torch.as_tensor(ok, device=dev),
                                          torch.as_tensor(stamps, device=dev), t, horizon, bucket, params,
                                          streams[torch.as_tensor(pick)].to(dev), slide_rows)
            sink.put(slice(start, start + n), decoded.bars[:n, :samples])
            re_prefills, chunks = re_prefills + decoded.re_prefills, chunks + 1
        sink.flush()
        return out, PathInfo(samples, chunk * bucket, chunks, re_prefills, t)
