"""Recompile analyzer on logs torch writes in this test, and on checked-in excerpts of each format."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from marketcast.compile.analyze import analyze_file, analyze_text, classify
from marketcast.errors import ConfigError

LOGS = Path(__file__).resolve().parents[1] / "data" / "compile_logs"

RECOMPILING_SCRIPT = textwrap.dedent(
    """
    import torch
    import torch._dynamo.config

    torch._dynamo.config.recompile_limit = 4

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x, layer_idx):
            return self.lin(x) * (layer_idx + 1)

    def write_cache(cache, x, cache_pos):
        cache[cache_pos] = x.sum()
        return cache * 2

    def scale(x):
        return x.sin() + 1

    layer = torch.compile(Layer(), backend="eager", dynamic=False)
    for i in range(3):  # 2 recompiles: guard layer_idx == N
        layer(torch.randn(2, 4), i)
    cached = torch.compile(write_cache, backend="eager", dynamic=False)
    cache = torch.zeros(16)
    for pos in range(7):  # 0/0..0/3 compile, 0/4 hits recompile_limit (4); the rest run eagerly
        cached(cache, torch.randn(3), pos)
    scaled = torch.compile(scale, backend="eager", dynamic=False)
    for n in (2, 3, 5):  # 2 recompiles: size mismatch
        scaled(torch.randn(n))
    """
)


@pytest.fixture(scope="module")
def live_log(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("recompile_log")
    script = folder / "recompiles_on_purpose.py"
    script.write_text(RECOMPILING_SCRIPT)
    env = {**os.environ, "TORCH_LOGS": "recompiles"}
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = folder / "recompile.log"
    log.write_text(proc.stderr)
    return log


def test_live_log_grouped_by_frame_and_guard(live_log):
    a = analyze_file(live_log)
    by = {(g.kind, g.function): g for g in a.groups}
    layer = by[("recompile", "forward")]
    assert (layer.count, layer.pattern, layer.cause) == (2, "layer_idx == N", "int_guard_layer_index")
    assert layer.location.endswith("recompiles_on_purpose.py:12")
    cache = by[("recompile", "write_cache")]
    assert (cache.count, cache.pattern, cache.cause) == (4, "cache_pos == N", "int_guard_cache_position")
    limit = by[("recompile_limit", "write_cache")]
    assert (limit.count, limit.limit, limit.pattern) == (1, 4, "cache_pos == N")
    size = by[("recompile", "scale")]
    assert size.count == 2 and size.cause == "size_mismatch" and "size mismatch" in size.pattern
    assert a.totals()["recompile"] == 8 and a.totals()["recompile_limit"] == 1
    assert "static" in a.to_dict()["fixes"]["int_guard_cache_position"]


def test_seed_production_excerpt():
    a = analyze_file(LOGS / "seed_000_production.log")
    assert a.totals() == {"recompile": 0, "recompile_limit": 1, "graph_break": 0, "cudagraph_skip": 1,
                          "cudagraph_overwritten": 0, "stance_refusal": 0}
    limit, skip = a.groups
    assert (limit.function, limit.location, limit.limit) == (
        "positional_embedding", "/path/to/toto/model/attention.py:105", 8)
    assert limit.pattern == "kv_cache._current_idx[N] == N" and limit.cause == "int_guard_cache_position"
    assert (skip.pattern, skip.instances, skip.cause) == ("mutated inputs", 2, "mutated_inputs")
    assert "static buffers" in skip.fix or "register_buffer" in skip.fix


def test_torch213_excerpt_with_graph_breaks():
    a = analyze_file(LOGS / "torch213_recompiles_graph_breaks.log")
    assert a.totals()["recompile"] == 4 and a.totals()["graph_break"] == 2 and a.totals()["recompile_limit"] == 1
    assert a.causes() == {"int_guard_layer_index": 3, "size_mismatch": 2, "item_call": 1, "unsupported_op": 1}
    breaks = [g for g in a.groups if g.kind == "graph_break"]
    assert [g.location.rsplit(":", 1)[1] for g in breaks] == ["16", "17"]
    assert breaks[0].pattern.startswith("Unsupported Tensor.item() call")


def test_cudagraph_and_stance_excerpt():
    a = analyze_file(LOGS / "cudagraph_and_stance.log")
    skips = [g for g in a.groups if g.kind == "cudagraph_skip"]
    assert [(g.pattern, g.count, g.instances) for g in skips] == [("mutated inputs", 2, 6),
                                                                  ("cpu device (argN_N)", 1, 1)]
    assert a.totals()["cudagraph_overwritten"] == 1 and a.totals()["stance_refusal"] == 1
    assert "cudagraph_mark_step_begin" in a.to_dict()["fixes"]["cudagraph_overwritten"]


@pytest.mark.parametrize("text,cause", [
    ("L['self'].layer_idx == 3", "int_guard_layer_index"),
    ("kv_cache._current_idx[7] == 0", "int_guard_cache_position"),
    ("seq_pos_offset == 8", "int_guard_cache_position"),
    ("tensor 'x' size mismatch at index 1. expected 512, actual 448", "size_mismatch"),
    ("len(L['inputs']) == 3", "size_mismatch"),
    ("Unsupported Tensor.item() call with capture_scalar_outputs=False", "item_call"),
    ("mutated inputs", "mutated_inputs"),
    ("something new", "other"),
])
def test_classify(text, cause):
    assert classify(text) == cause


def test_empty_and_missing_logs():
    assert analyze_text("", "x").totals()["recompile"] == 0
    with pytest.raises(ConfigError, match="no such log file"):
        analyze_file("/nonexistent/recompile.log")
