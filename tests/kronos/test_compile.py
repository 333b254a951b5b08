"""Compile once: after ``warmup`` for the loop's shapes, new lookbacks, horizons, sample counts, data and
sampling settings (same buckets) run the sealed graphs under fail_on_recompile with zero recompiles and no
eager fallback, and give the eager forecaster's numbers."""

from __future__ import annotations

import numpy as np
import torch

from marketcast.forecast import make_batch
from marketcast.forecast.kronos import KronosForecaster
from marketcast.forecast.kronos.sampling import SamplingParams
from marketcast.runtime.counters import recompile_count
from marketcast.runtime.guard import find_guards


def test_zero_recompiles_after_warmup(tiny_model, tiny_tokenizer, sp500):
    fc = KronosForecaster(tiny_model, tiny_tokenizer, mode="default")
    eager = KronosForecaster(tiny_model, tiny_tokenizer, mode=None)
    # 2 windows, 4 paths, context bucket 32 (the tiny max_context): horizon 1 (one graph) and 5..8 (8 slots)
    seconds = [fc.warmup(24, 1, 4, batch_size=2), fc.warmup(24, 8, 4, batch_size=2)]
    assert all(s > 0 for s in seconds)
    guards = find_guards(fc)
    assert sorted(g.name for g in guards) == ["kronos.detok[2, 4, 32, 8]", "kronos.prefill[2, 4, 32, 1]",
                                              "kronos.prefill[2, 4, 32, 8]", "kronos.step[2, 4, 32, 8]"]
    assert all(g.stats.sealed and g.stats.compiled for g in guards)
    before = recompile_count()
    ends = [len(sp500) - 1, len(sp500) - 40]
    cases = [(16, 6, 4, SamplingParams()), (30, 8, 3, SamplingParams()), (20, 1, 4, SamplingParams(0.7, 3, 0.9)),
             (10, 5, 4, SamplingParams(1.3, 0, 0.5)), (28, 1, 3, SamplingParams())]  # 30 + 8 slides the window
    with torch.compiler.set_stance("fail_on_recompile"):
        for context, horizon, samples, params in cases:
            fc.sampling = eager.sampling = params
            batch = make_batch(sp500, ends, context, horizon)
            out = fc.forecast(batch, horizon, samples, seed=1)
            assert out.samples.shape == (2, 4, samples, horizon)
            assert out.meta["compiled"] and out.meta["fallback_reason"] is None
            np.testing.assert_allclose(out.samples, eager.forecast(batch, horizon, samples, seed=1).samples,
                                       rtol=1e-4)
    assert recompile_count() - before == 0 and len(find_guards(fc)) == len(guards)
    for g in guards:
        assert g.stats.recompiles_after_seal == 0 and g.stats.refused_recompiles == 0 and g.active


def test_new_bucket_compiles_once_and_a_refused_recompile_falls_back(tiny_model, tiny_tokenizer, sp500, caplog):
    """A window count first seen after warm-up compiles its own graph once (no fallback). A recompile of a
    sealed bucket (here forced by float64 sampling knobs) is refused: one warning, eager from then on, valid
    output."""
    fc = KronosForecaster(tiny_model, tiny_tokenizer, mode="default")
    two = make_batch(sp500, [len(sp500) - 1, len(sp500) - 2], 16, 1)
    fc.forecast(two, 1, 4, seed=0)  # the 2-window bucket
    out = fc.forecast(make_batch(sp500, [len(sp500) - 1], 16, 1), 1, 4, seed=0)  # 1 window: a new bucket
    assert [g.name for g in find_guards(fc)] == ["kronos.prefill[2, 4, 32, 1]", "kronos.prefill[1, 4, 32, 1]"]
    assert out.meta["compiled"] and out.meta["fallback_reason"] is None
    assert all(g.stats.sealed and g.stats.recompiles_after_seal == 0 for g in find_guards(fc))
    paths = fc.decoder._paths[2, 4, 1]
    paths.knobs = paths.knobs.double()  # a dtype the sealed graph was not compiled for
    with caplog.at_level("WARNING", logger="marketcast.compile"):
        out = fc.forecast(two, 1, 4, seed=0)
    assert out.meta["fallback_reason"] and not out.meta["compiled"]
    assert find_guards(fc)[0].stats.refused_recompiles == 1
    assert np.isfinite(out.samples).all() and caplog.text.count("torch.compile disabled") == 1
