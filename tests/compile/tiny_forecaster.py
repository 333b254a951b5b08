"""A tiny real torch forecaster for harness tests: a linear step in GuardedCompile, seeded Gaussian samples."""

from __future__ import annotations

import numpy as np
import torch

from marketcast.runtime.guard import GuardedCompile
from marketcast.forecast.base import ContextBatch, Forecast


class TinyStep(torch.nn.Module):
    def __init__(self, context: int, horizon: int) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.proj = torch.nn.Linear(context, 2 * horizon)
        with torch.no_grad():
            self.proj.weight.copy_(torch.randn(self.proj.weight.shape, generator=g) * 0.01)
            self.proj.bias.zero_()
        self.horizon = horizon

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.proj(x)
        drift, log_scale = out[:, : self.horizon], out[:, self.horizon :]
        return drift.cumsum(-1) * 0.01, torch.nn.functional.softplus(log_scale) * 0.01 + 1e-3


class TinyForecaster:
    """Forecaster protocol; ``shape_shift_after`` > 0 feeds a different length from that call on (forced recompile)."""

    name = "tiny"
    fields = ("close", "high", "low")

    def __init__(self, mode: str | None, context: int, horizon: int, shape_shift_after: int = 0) -> None:
        self.context, self.horizon = context, horizon
        self.net = TinyStep(context, horizon).eval()
        self.step = GuardedCompile(self.net, mode, name="tiny", dynamic=False)
        self.calls = 0
        self.shape_shift_after = shape_shift_after

    def forecast(self, batch: ContextBatch, horizon: int, num_samples: int, seed: int = 0) -> Forecast:
        self.calls += 1
        close = batch.field("close")[:, -self.context :]
        last = close[:, -1:]
        x = torch.as_tensor(np.log(close / last), dtype=torch.float32)
        if self.shape_shift_after and self.calls > self.shape_shift_after:
            x = torch.cat([x, x[:1]], 0)  # one extra row: a new shape the sealed graph refuses
        with torch.no_grad():
            loc, scale = self.step(x)
        loc, scale = loc[: len(close)], scale[: len(close)]
        g = torch.Generator().manual_seed(seed)
        noise = torch.randn((len(close), num_samples, horizon), generator=g)
        paths = loc[:, None, :] + scale[:, None, :] * noise
        closes = last[:, :, None] * np.exp(paths.numpy().astype(np.float64))
        samples = np.stack([closes, closes * 1.01, closes * 0.99], axis=1)
        meta = {"model": "tiny", "compile_mode": self.step.stats.mode, "compiled": self.step.active,
                "fallback_reason": self.step.stats.fallback_reason}
        return Forecast(samples=samples, fields=self.fields, meta=meta)


def create(*, weights=None, device="cpu", dtype="float32", compile=None, seed=0) -> TinyForecaster:
    """Registry-style factory (tests register it in place of a model); weights="shift" forces a recompile."""
    mode = None if compile in (None, "eager") else compile
    return TinyForecaster(mode, context=64, horizon=5, shape_shift_after=3 if weights == "shift" else 0)
