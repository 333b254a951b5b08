"""Cold vs warm start in fresh processes: persistent artifacts make the second start hit the inductor cache."""

from __future__ import annotations

from marketcast.compile.startprobe import measure_start


def test_second_process_starts_warm_from_saved_artifacts():
    result = measure_start("tests.compile.tiny_forecaster:create", "tiny", "default", context=64, horizon=5,
                           samples=16, batch=2, timeout_s=300,
                           extra_env={"TORCHINDUCTOR_COMPILE_THREADS": "1"})  # no worker pool: faster on 2 CPUs
    assert "error" not in result, result
    cold, warm = result["cold"], result["warm"]
    assert cold["cache_loaded"] is False and cold["cache_saved"] == cold["cache_file"]
    assert cold["fxgraph_cache_miss"] >= 1 and cold["fxgraph_cache_hit"] == 0
    # the warm process had an empty inductor cache of its own: every hit came from the loaded artifacts
    assert warm["cache_loaded"] is True and warm["fxgraph_cache_hit"] >= 1 and warm["fxgraph_cache_miss"] == 0
    assert cold["start_s"] > 0 and warm["start_s"] > 0 and result["speedup"] > 0

