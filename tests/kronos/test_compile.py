"""Compile once: after warm-up and seal, new lookbacks, horizons and batch sizes (same row bucket) run the
sealed graphs under fail_on_recompile with zero recompiles and no eager fallback."""

from __future__ import annotations

import numpy as np

from marketcast.runtime.counters import recompile_count
from marketcast.runtime.guard import find_guards
from marketcast.forecast import make_batch
from marketcast.forecast.kronos import KronosForecaster


def test_zero_recompiles_after_warmup(tiny_model, tiny_tokenizer, sp500):
    fc = KronosForecaster(tiny_model, tiny_tokenizer, mode="default", max_rows=8)
    eager = KronosForecaster(tiny_model, tiny_tokenizer, mode=None, max_rows=8)
    ends = [len(sp500) - 1, len(sp500) - 40]
    warm = fc.forecast(make_batch(sp500, ends, 24, 5), 5, 4, seed=0)  # rows 8: the bucket every call below uses
    guards = find_guards(fc)
    assert [g.name for g in guards] == ["kronos.step[8]"] and guards[0].stats.compiled
    assert guards[0].stats.sealed  # sealed by its first call: from here on a recompile is refused
    before = recompile_count()
    cases = [(16, 3, ends, 4), (30, 8, ends, 4), (24, 12, ends[:1], 8), (10, 6, ends + [len(sp500) - 80], 2),
             (20, 4, ends, 8)]  # 16 rows: two chunks of the same 8-row graph
    for context, horizon, ends_, samples in cases:
        batch = make_batch(sp500, ends_, context, horizon)
        out = fc.forecast(batch, horizon, samples, seed=1)
        assert out.samples.shape == (len(ends_), 4, samples, horizon)
        assert out.meta["compiled"] and out.meta["fallback_reason"] is None
        np.testing.assert_allclose(out.samples, eager.forecast(batch, horizon, samples, seed=1).samples, rtol=1e-4)
    # other sampling knobs and a new lookback through predict_series: the knobs are tensors, same graph
    res = fc.predict_series(sp500.iloc[-60:], pred_len=5, lookback=18, temperature=0.7, top_k=3, sample_count=8)
    assert res.absolute.shape == (8, 5, 4) and np.isfinite(res.absolute).all()
    assert recompile_count() - before == 0
    for g in guards:
        assert g.stats.recompiles_after_seal == 0 and g.stats.refused_recompiles == 0 and g.active
    assert warm.meta["compile_mode"] == "default" and warm.meta["samples_per_batch_used"] == 8


def test_new_row_bucket_compiles_once_and_a_refused_recompile_falls_back(tiny_model, tiny_tokenizer, sp500, caplog):
    """A row count first seen after warm-up compiles its own graph once (no fallback). A recompile of a sealed
    bucket (here forced by float64 sampling knobs) is refused: one warning, eager from then on, valid output."""
    fc = KronosForecaster(tiny_model, tiny_tokenizer, mode="default", max_rows=8)
    batch = make_batch(sp500, [len(sp500) - 1], 16, 3)
    fc.forecast(batch, 3, 2, seed=0)  # the 2-row bucket
    out = fc.forecast(batch, 3, 1, seed=0)  # 1 row: a new bucket, compiled once and sealed
    assert [g.name for g in find_guards(fc)] == ["kronos.step[2]", "kronos.step[1]"]
    assert out.meta["compiled"] and out.meta["fallback_reason"] is None
    assert all(g.stats.sealed and g.stats.recompiles_after_seal == 0 for g in find_guards(fc))
    cache = fc.decoder._caches[2]
    cache.knobs = cache.knobs.double()  # a dtype the sealed graph was not compiled for
    with caplog.at_level("WARNING", logger="marketcast.compile"):
        out = fc.forecast(batch, 3, 2, seed=0)
    assert out.meta["fallback_reason"] and not out.meta["compiled"]
    assert find_guards(fc)[0].stats.refused_recompiles == 1
    assert np.isfinite(out.samples).all() and caplog.text.count("torch.compile disabled") == 1
