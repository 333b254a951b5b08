"""Compiled Toto 2.0 (inductor on CPU): after ``warmup`` new data, contexts within a patch, horizons within a
patch and batch sizes within a row bucket never recompile, under torch's fail_on_recompile stance, and the
compiled quantiles equal the eager ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from marketcast.errors import ConfigError
from marketcast.forecast.toto2 import Toto2Config, Toto2Forecaster
from marketcast.forecast.toto2.model import random_model
from marketcast.forecast.warmup import synthetic_batch
from marketcast.runtime.counters import recompile_count
from marketcast.runtime.guard import find_guards

# (windows, context, horizon): 3 and 4 windows share the 4-row bucket, contexts 97..128 four patches,
# horizons 1..32 one patch
CALLS = [(3, 100, 20), (4, 128, 32), (3, 97, 1), (4, 120, 7)]


def test_zero_recompiles_after_warmup_and_matches_eager():
    model = random_model(Toto2Config.size("4m"), seed=5)
    eager = Toto2Forecaster(random_model(Toto2Config.size("4m"), seed=5), compile="eager")
    fc = Toto2Forecaster(model, compile="default")
    assert fc.warmup(128, 32, batch_size=4) > 0
    guards = find_guards(fc)
    assert [g.name for g in guards] == ["toto2.quantiles[4, 4, 1]"] and guards[0].stats.sealed
    before = recompile_count()
    with torch.compiler.set_stance("fail_on_recompile"):
        for i, (n, ctx, h) in enumerate(CALLS):
            batch = synthetic_batch(n, ctx, h, seed=10 + i)
            out = fc.forecast(batch, h, 16, seed=i)
            assert out.samples.shape == (n, 3, 16, h) and np.isfinite(out.samples).all()
            assert out.meta["compiled"] is True and out.meta["fallback_reason"] is None
            np.testing.assert_allclose(out.quantiles, eager.quantiles(batch, h), rtol=1e-5)
    assert recompile_count() - before == 0
    assert len(find_guards(fc)) == 1
    g = guards[0]
    assert g.stats.compiled and g.active and g.stats.recompiles_after_seal == 0 and g.stats.refused_recompiles == 0


def test_block_decoding_compiles_once_and_matches_eager():
    """Block decoding (2-patch blocks, horizons of 5 patches): one graph per bucket with its KV cache inside, no
    recompile for new data, contexts within a patch or horizons within a patch, and the eager quantiles."""
    eager = Toto2Forecaster(random_model(Toto2Config.size("4m"), seed=5), compile="eager", decode_block=64)
    fc = Toto2Forecaster(random_model(Toto2Config.size("4m"), seed=5), compile="default", decode_block=64)
    fc.warmup(128, 150, batch_size=4)
    before = recompile_count()
    with torch.compiler.set_stance("fail_on_recompile"):
        for i, (n, ctx, h) in enumerate([(3, 100, 150), (4, 128, 140), (3, 97, 129)]):
            batch = synthetic_batch(n, ctx, h, seed=10 + i)
            out = fc.forecast(batch, h, 16, seed=i)
            assert out.meta["compiled"] is True and out.samples.shape == (n, 3, 16, h)
            np.testing.assert_allclose(out.quantiles, eager.quantiles(batch, h), rtol=1e-5)
    assert recompile_count() - before == 0
    assert [g.name for g in find_guards(fc)] == ["toto2.decode[4, 4, 5, 2]"]


def test_decode_block_must_be_whole_patches():
    with pytest.raises(ConfigError, match=r"decode_block 48 is not a positive multiple of the patch size 32"):
        Toto2Forecaster(random_model(Toto2Config.size("4m")), compile="eager", decode_block=48)

