"""After ``warmup`` for the loop's shapes, Toto never recompiles: new data, context lengths, batch sizes,
sample counts and horizons inside their buckets, one patch and four, under torch's fail_on_recompile stance."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from marketcast.runtime.counters import recompile_count
from marketcast.runtime.guard import find_guards
from marketcast.forecast.toto import TotoForecaster
from tests.toto.conftest import windows

# (windows, context, horizon): contexts 129..192 share 3 patches, 3 and 4 windows share the 4-row bucket,
# horizons 17..32 share the 32-step draw, 129..256 the 8-slot cache, 17..32 samples the 32-path bucket
WARMUP = [(4, 192, 32), (4, 192, 256)]
CALLS = [(3, 150, 20), (3, 131, 30), (4, 192, 256), (3, 170, 200), (3, 140, 129), (4, 188, 17)]


@pytest.mark.parametrize("mode", ["default", pytest.param("max-autotune-no-cudagraphs", marks=pytest.mark.slow)])
def test_zero_recompiles_after_warmup(tiny_model, sp500, mode):
    fc = TotoForecaster(tiny_model, compile=mode, samples_per_batch=32)
    seconds = [fc.warmup(ctx, h, 32, batch_size=n) for n, ctx, h in WARMUP]
    assert all(s > 0 for s in seconds)
    guards = find_guards(fc)
    assert {g.name.split("[")[0] for g in guards} == {"toto.prefill", "toto.prefill_kv", "toto.decode"}
    assert all(g.stats.sealed for g in guards)
    before = recompile_count()
    with torch.compiler.set_stance("fail_on_recompile"):
        for i, (n, ctx, h) in enumerate(CALLS):
            out = fc.forecast(windows(sp500, n, ctx, h, first=1500 + 37 * i), h, 32 - 3 * i, seed=i)
            assert out.samples.shape == (n, 3, 32 - 3 * i, h) and np.isfinite(out.samples).all()
            assert out.meta["compiled"] is True and out.meta["fallback_reason"] is None
            assert out.meta["compile_mode"] == mode
    assert recompile_count() - before == 0
    assert len(find_guards(fc)) == len(guards)  # no new bucket was needed
    for g in guards:
        assert g.stats.compiled and g.active and g.stats.fallback_reason is None
        assert g.stats.recompiles_after_seal == 0 and g.stats.refused_recompiles == 0


def test_compiled_matches_eager(tiny_model, sp500):
    batch = windows(sp500, 2, 200, 100)
    eager = TotoForecaster(tiny_model, compile="eager", samples_per_batch=32).forecast(batch, 100, 32, seed=3)
    compiled = TotoForecaster(tiny_model, compile="default", samples_per_batch=32).forecast(batch, 100, 32, seed=3)
    assert compiled.meta["compiled"] is True
    np.testing.assert_allclose(compiled.samples, eager.samples, rtol=1e-3)
