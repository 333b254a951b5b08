"""Recompile analyzer on a script that recompiles on purpose, checked-in excerpts, the CUDA-graph lines (which
need a GPU), and the classification rules themselves."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from marketcast.compile.analyze import analyze_file, analyze_text
from marketcast.compile.causes import (
    classify_cudagraph,
    classify_guard,
    classify_reason,
    describe_values,
    guard_pattern,
    split_guard,
)
from tests.compile.log_oracle import assert_counts_add_up, where

LOGS = Path(__file__).resolve().parents[1] / "data" / "compile_logs"


# ---------------------------------------------------------------- a script that recompiles on purpose


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
    for pos in range(7):  # 0/0..0/3 compile, the attempt 0/4 hits recompile_limit (4); the rest run eagerly
        cached(cache, torch.randn(3), pos)
    scaled = torch.compile(scale, backend="eager", dynamic=False)
    for n in (2, 3, 5):  # 2 recompiles: size mismatch
        scaled(torch.randn(n))
    """
)


def test_script_log_grouped_by_frame_and_guard(tmp_path):
    script = tmp_path / "recompiles_on_purpose.py"
    script.write_text(RECOMPILING_SCRIPT)
    proc = subprocess.run([sys.executable, str(script)], env={**os.environ, "TORCH_LOGS": "recompiles"},
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    a = analyze_text(proc.stderr, "script")
    assert_counts_add_up(a, proc.stderr)
    by = {(g.kind, g.function): g for g in a.groups}
    layer = by[("recompile", "forward")]
    assert (layer.count, layer.pattern, layer.cause, layer.values) == (2, "layer_idx == N", "int_guard_layer_index",
                                                                       ["0", "1"])
    cache = by[("recompile", "write_cache")]
    assert (cache.count, cache.pattern, cache.cause, cache.values) == (3, "cache_pos == N",
                                                                       "int_guard_cache_position", ["0", "1", "2"])
    limit = by[("recompile_limit", "write_cache")]
    assert (limit.count, limit.limit, limit.pattern, limit.values) == (1, 4, "cache_pos == N", ["3"])
    size = by[("recompile", "scale")]
    assert (size.count, size.cause, size.values) == (2, "size_mismatch", ["2", "3", "5"])
    assert size.detail == "dim 0 of 'x' took 2, 3, 5"
    assert "static" in a.to_dict()["causes"]["int_guard_cache_position"]["fix"]


# ---------------------------------------------------------------- checked-in excerpts


def test_seed_production_excerpt():
    """The original system's production log as quoted in its design notes (older torch, no glog pid/file)."""
    a = analyze_file(LOGS / "seed_000_production.log")
    assert a.totals()["recompile_limit"] == 1 and a.totals()["cudagraph_skip"] == 1 and sum(a.totals().values()) == 2
    limit, skip = a.groups
    assert (limit.function, limit.location, limit.limit) == (
        "positional_embedding", "/path/to/toto/model/attention.py:105", 8)
    assert limit.pattern == "kv_cache._current_idx[N] == N" and limit.cause == "int_guard_cache_position"
    assert (skip.pattern, skip.instances, skip.cause) == ("mutated inputs", 2, "mutated_inputs")
    assert "register_buffer" in skip.fix


def test_torch213_excerpt_with_graph_breaks():
    a = analyze_file(LOGS / "torch213_recompiles_graph_breaks.log")
    assert a.totals()["recompile"] == 4 and a.totals()["graph_break"] == 2 and a.totals()["recompile_limit"] == 1
    assert a.causes() == {"int_guard_layer_index": {"recompile_limit": 1, "recompile": 2},
                          "size_mismatch": {"recompile": 2}, "item_call": {"graph_break": 1},
                          "unsupported_op": {"graph_break": 1}}
    breaks = [g for g in a.groups if g.kind == "graph_break"]
    assert [(g.function, g.location.rsplit(":", 1)[1]) for g in breaks] == [("h", "16"), ("h", "17")]
    assert breaks[1].pattern == "Failed to trace builtin operator" and "print" in breaks[1].fix


def test_cudagraph_and_stance_excerpt():
    """Hand-written, not captured: ``git log --follow`` shows this file arrived in 146d421 with the first
    analyzer, and nothing in its history says it came from a GPU. Its format says the same: torch 2.13 logs
    the skip from cudagraph_utils.py:380 (the file says 381) under the ``[__cudagraphs]`` artifact tag (absent),
    and its timestamps/pid (.123000, 4242) are round. No GPU was lent to this session to capture a real one."""
    a = analyze_file(LOGS / "cudagraph_and_stance.log")
    skips = [g for g in a.groups if g.kind == "cudagraph_skip"]
    assert [(g.pattern, g.count, g.instances, g.cause) for g in skips] == [
        ("mutated inputs", 2, 6, "mutated_inputs"), ("cpu device (argN_N)", 1, 1, "cpu_tensor")]
    assert where(skips[0]) == "/src/toto/model/util.py:210" and skips[0].function == "append"
    stance = next(g for g in a.groups if g.kind == "stance_refusal")
    assert (stance.function, stance.location) == ("decode_step", "kronos.py:88")
    assert a.totals()["cudagraph_overwritten"] == 1
    assert "cudagraph_mark_step_begin" in a.to_dict()["causes"]["cudagraph_overwritten"]["fix"]


# Hand-written (no GPU in this session): each line is torch 2.13's own wording, read from its source:
# torch/_inductor/cudagraph_utils.py (format_default_skip_message, get_mutation_stack_trace,
# check_multiple_devices_or_any_cpu_nodes), compile_fx.py (symbolic shapes, incompatible op) and
# output_code.py, which prefixes "skipping cudagraphs due to" once more to a lowering reason.
_HEAD = "W1123 10:00:00.000000 1 torch/_inductor/cudagraph_utils.py:380] [0/0] [__cudagraphs] "
CUDAGRAPH_SKIPS = [
    (f"{_HEAD}skipping cudagraphs due to mutated inputs (3 instances). Found from : \n"
     f'{_HEAD}   File "/m/model.py", line 42, in step\n{_HEAD}    cache[:, pos] = k', "mutated_inputs"),
    (f"{_HEAD}skipping cudagraphs due to skipping cudagraphs due to cpu device (arg3_1)", "cpu_tensor"),
    (f"{_HEAD}skipping cudagraphs due to multiple devices: device(type='cuda', index=0), device(type='cpu')",
     "cpu_tensor"),
    (f"{_HEAD}skipping cudagraphs due to graph with symbolic shapes inputs and "
     "config.triton.cudagraph_skip_dynamic_graphs=True. Found from ", "dynamic_shapes"),
    (f"{_HEAD}skipping cudagraphs due to disabling cudagraphs due to incompatible op "
     "aten._local_scalar_dense.default Found from ", "incompatible_op"),
]


@pytest.mark.parametrize("text,cause", CUDAGRAPH_SKIPS)
def test_each_cudagraph_skip_reason_gets_its_fix(text, cause):
    a = analyze_text(text)
    (g,) = a.groups
    assert (g.kind, g.cause) == ("cudagraph_skip", cause)
    assert not g.pattern.startswith(("skipping", "disabling")) and "Found from" not in g.pattern
    if cause == "mutated_inputs":
        assert (g.instances, g.function, g.location) == (3, "step", "/m/model.py:42")


# ---------------------------------------------------------------- the rules themselves


def test_guard_split_keeps_the_source_comment_and_hint_apart():
    g = split_guard("layer_idx == 0                                           # seq_pos_offset = "
                    "kv_cache.seq_len(layer_idx)  # toto/model/attention.py:112 in positional_embedding")
    assert g.expression == "layer_idx == 0" and g.context.startswith("seq_pos_offset") and g.hint == ""
    h = split_guard("s.n == 1     # return x * s.n  # m.py:15 in forward (HINT: torch.compile considers integer "
                    "attributes of the nn.Module to be static. Or convert this integer into a tensor.)")
    assert h.expression == "s.n == 1" and h.context == "return x * s.n  # m.py:15 in forward"
    assert h.hint.startswith("torch.compile considers integer attributes")
    assert classify_guard(h.expression, h.hint) == "module_int_attribute"


@pytest.mark.parametrize("text,cause", [
    ("L['self'].layer_idx == 3", "int_guard_layer_index"),
    ("kv_cache._current_idx[7] == 0", "int_guard_cache_position"),
    ("seq_pos_offset == 8", "int_guard_cache_position"),
    ("seq_len == 4", "query_length"),
    ("___stack1 == 0", "int_across_graph_break"),
    ("expected type of 'attention_mask' to be a tensor type, ' but found <class 'NoneType'>", "type_guard"),
    ("mask is None", "type_guard"),
    ("tensor 'x' size mismatch at index 1. expected 512, actual 448", "size_mismatch"),
    ("tensor 'x' rank mismatch. expected 1, actual 2", "size_mismatch"),
    ("len(L['inputs']) == 3", "size_mismatch"),
    ("tensor 'x' dtype mismatch. expected Float, actual Double", "dtype_device_mismatch"),
    ("GLOBAL_STATE changed: grad_mode ", "dtype_device_mismatch"),
    ("something new", "other"),
])
def test_classify_guard(text, cause):
    assert classify_guard(text) == cause


def test_classify_reasons_and_patterns():
    assert classify_reason("Unsupported Tensor.item() call with capture_scalar_outputs=False") == "item_call"
    assert classify_reason("Data-dependent branching") == "data_dependent_branch"
    assert classify_reason("Failed to trace builtin operator") == "unsupported_op"
    assert classify_cudagraph("input storage mutation") == "mutated_inputs"
    assert guard_pattern("tensor 'kv[0]' size mismatch at index 2. expected 8, actual 1") == (
        "tensor 'kv[0]' size mismatch at index 2", ["8", "1"])
    assert guard_pattern("L['x'].size()[1] == 512") == ("L['x'].size()[1] == N", ["512"])
    assert guard_pattern("tensor 'x' dtype mismatch. expected Float, actual Double") == (
        "tensor 'x' dtype mismatch", ["Float", "Double"])
    assert describe_values("tensor 'x' size mismatch at index 0", ["2", "1"]) == "dim 0 of 'x' took 2, 1"
    assert describe_values("layer_idx == N", ["0", "1"]) == "values seen: 0, 1"
