"""Bars in, sample paths out: upstream KronosPredictor's preprocessing around the cached decoder.

Per series: OHLCV + amount (amount = volume x mean(OHLC) when absent, as upstream), z-scored over the real
(unpadded) bars with ``(x - mean) / (std + 1e-5)``, clipped to +-5; tokenized once, repeated
``sample_count`` times, decoded in row chunks of a fixed size, de-normalised. Unlike upstream's ``predict``
the sample paths are returned, not their mean.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from marketcast.forecast.kronos.decode import CachedDecoder
from marketcast.forecast.kronos.model import Kronos
from marketcast.forecast.kronos.sampling import SamplingParams
from marketcast.forecast.kronos.tokenizer import KronosTokenizer

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


def row_bucket(rows: int, max_rows: int) -> int:
    """Rows per decode chunk: the next power of two (so few graph shapes), at most ``max_rows``."""
    return min(1 << max(rows - 1, 0).bit_length(), max_rows)


@dataclass
class PathInfo:
    rows_per_chunk: int
    chunks: int
    re_prefills: int
    lookback: int


class KronosPipeline:
    def __init__(self, model: Kronos, tokenizer: KronosTokenizer, decoder: CachedDecoder, max_rows: int) -> None:
        self.model, self.tokenizer, self.decoder, self.max_rows = model, tokenizer, decoder, max_rows

    @property
    def device(self) -> torch.device:
        return self.model.head.proj_s1.weight.device

    @torch.no_grad()
    def sample_paths(self, x: np.ndarray, valid: np.ndarray, x_time: np.ndarray, y_time: np.ndarray,
                     sample_count: int, params: SamplingParams, seed: int = 0) -> tuple[np.ndarray, PathInfo]:
        """``x`` ``[B, T, 6]`` bars, ``valid`` ``[B, T]``, ``x_time``/``y_time`` ``[B, T|H, 5]`` calendar
        features -> absolute sample paths ``[B, S, H, 6]`` (float64)."""
        window = self.decoder.window
        x, valid, x_time = x[:, -window:], valid[:, -window:], x_time[:, -window:]
        b, t, _ = x.shape
        h = y_time.shape[1]
        if not valid[:, -1].all():
            raise ValueError("every window must end with a real bar (padding goes on the left)")
        norm, mean, std = normalise(x, valid)
        dev = self.device
        valid_t = torch.as_tensor(valid, device=dev)
        s1, s2 = self.tokenizer.encode(torch.as_tensor(norm, device=dev), valid_t)
        stamps = torch.as_tensor(np.concatenate([x_time, y_time], 1), device=dev)

        rows = b * sample_count
        chunk = row_bucket(rows, self.max_rows)
        order = np.arange(rows) // sample_count  # series of each row, b-major like upstream
        generator = torch.Generator(device=dev).manual_seed(int(seed))
        out, re_prefills = [], 0
        for start in range(0, rows, chunk):
            idx = order[start : start + chunk]
            idx = np.concatenate([idx, np.repeat(idx[:1], chunk - len(idx))])  # pad the last chunk with repeats
            series, inverse = (torch.as_tensor(a, device=dev) for a in np.unique(idx, return_inverse=True))
            gen = self.decoder.generate(s1[series], s2[series], stamps[series], valid_t[series], h, params, generator,
                                        rows=inverse)
            row = series[inverse]
            out.append(self.detokenize(s1[row], s2[row], valid_t[row], gen.s1, gen.s2)[: rows - start])
            re_prefills += gen.re_prefills
        z = torch.cat(out).double().cpu().numpy().reshape(b, sample_count, h, -1)
        paths = z * (std[:, None].astype(np.float64) + 1e-5) + mean[:, None]
        return paths, PathInfo(chunk, len(out), re_prefills, t)

    def detokenize(self, s1, s2, valid, new_s1, new_s2) -> torch.Tensor:
        """Decode the last ``max_context`` tokens (context + generated, as upstream) -> ``[N, H, 6]``."""
        h, window = new_s1.shape[1], self.decoder.window
        full_s1 = torch.cat([s1, new_s1], 1)[:, -window:]
        full_s2 = torch.cat([s2, new_s2], 1)[:, -window:]
        full_valid = torch.cat([valid, valid.new_ones(valid.shape[0], h)], 1)[:, -window:]
        return self.tokenizer.decode(full_s1, full_s2, full_valid)[:, -h:].float()
