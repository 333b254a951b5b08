"""Recompile analyzer on real logs: toto-ts and upstream Kronos run under torch.compile in this session
(``conftest.reference_logs``), a script that recompiles on purpose, and checked-in excerpts.

Counts are checked against an oracle read straight from the raw text (line counts of each torch message), so
an event counted twice or lost fails the test whatever the grouping does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from marketcast.compile.analyze import analyze_file, analyze_paths, analyze_text
from marketcast.compile.causes import (
    classify_cudagraph,
    classify_guard,
    classify_reason,
    describe_values,
    guard_pattern,
    split_guard,
)
from marketcast.errors import ConfigError

LOGS = Path(__file__).resolve().parents[1] / "data" / "compile_logs"


def raw_counts(text: str) -> dict[str, int]:
    """What torch printed, counted without the analyzer."""
    return {
        "recompiling": text.count("Recompiling function"),
        "limit": text.count("hit config.recompile_limit"),
        "graph_break": len(re.findall(r"Graph break (?:\(user stack suppressed due to duplicate graph break\) )?"
                                      r"in user code at", text)),
        "skipped": text.count("Failed to handle graph break gracefully"),
    }


def where(group) -> str:
    return (group.location or "").split("site-packages/")[-1]


def find(analysis, kind: str, location: str, pattern: str):
    matches = [g for g in analysis.groups if g.kind == kind and where(g) == location and g.pattern == pattern]
    assert len(matches) == 1, [(g.kind, where(g), g.pattern) for g in analysis.groups]
    return matches[0]


def assert_counts_add_up(analysis, text: str) -> None:
    raw, totals = raw_counts(text), analysis.totals()
    # the attempt that hits the limit is logged as "Recompiling" too, but compiles nothing: it is the limit hit
    assert totals["recompile"] + totals["recompile_limit"] == raw["recompiling"]
    assert totals["recompile_limit"] == raw["limit"]
    assert totals["graph_break"] + totals["frame_skipped"] == raw["graph_break"]
    assert totals["frame_skipped"] == raw["skipped"]
    assert sum(sum(per_kind.values()) for per_kind in analysis.causes().values()) == sum(totals.values())
    assert sum(g.count for g in analysis.groups) == sum(totals.values())


# ---------------------------------------------------------------- toto-ts (3 layers, context 32, horizon 36)


@pytest.fixture(scope="module")
def toto(reference_logs):
    return analyze_file(reference_logs["toto"])


def test_toto_every_event_counted_once(toto, reference_logs):
    text = reference_logs["toto"].read_text()
    assert_counts_add_up(toto, text)
    assert toto.totals()["frame_skipped"] == 2 and toto.totals()["recompile_limit"] == 2


def test_toto_guard_classified_on_its_expression_with_the_source_line_as_context(toto):
    # the original system's frame: its guard is on the layer index, installed while tracing a cache call
    pe = find(toto, "recompile", "toto/model/attention.py:105", "layer_idx == N")
    assert pe.function == "positional_embedding" and pe.cause == "int_guard_layer_index"
    assert pe.context.startswith("seq_pos_offset = kv_cache.seq_len(layer_idx)")
    # the same guard installed at an .item() line is still a layer index, not an .item() call
    append = find(toto, "recompile", "toto/model/util.py:174", "layer_idx == N")
    assert append.cause == "int_guard_layer_index" and ".item()" in append.context
    assert "own cache module" in append.fix


def test_toto_skipped_frames_are_the_most_severe_kind_with_their_real_cause(toto):
    skipped = [g for g in toto.groups if g.kind == "frame_skipped"]
    assert len(skipped) == 2 and toto.groups[:2] == skipped
    loop = find(toto, "frame_skipped", "toto/model/transformer.py:329",
                "Unsupported Tensor.item() call with capture_scalar_outputs=False")
    assert loop.function == "torch_dynamo_resume_in_forward_at_329"  # from "frame skipped: ..." in the log
    assert loop.cause == "item_call" and loop.context == "then: graph break in loop"
    assert "runs eager on every call" in loop.effect and "keep the value on device" in loop.fix
    other = next(g for g in skipped if g is not loop)
    assert (other.function, other.cause) == ("append", "item_call")  # no "frame skipped:" line: the traceback's
    assert all(g.kind != "graph_break" or "Failed to handle" not in g.example for g in toto.groups)


def test_toto_type_guard_and_query_length_guard(toto):
    mask = find(toto, "recompile", "toto/model/transformer.py:121",
                "expected type of 'attention_mask' to be a tensor type, but found NoneType")
    assert mask.cause == "type_guard" and mask.count == 2
    assert "consistent type" in mask.fix and "separate functions" in mask.fix
    q = find(toto, "recompile", "toto/model/attention.py:207", "seq_len == N")
    assert q.cause == "query_length" and q.values == ["8"]  # prefill: 32 steps / patch 4 = 8 patches
    assert "prefill and decode as separate functions" in q.fix


def test_toto_varying_dimension_and_its_values(toto):
    grow = find(toto, "recompile", "toto/model/backbone.py:232", "tensor 'inputs' size mismatch at index 2")
    assert grow.count == 7 and grow.values == [str(n) for n in range(32, 61, 4)]  # 32 context + 4 per step
    assert grow.detail.startswith("dim 2 of 'inputs' took 32, 36, 40") and "grows by 4" in grow.detail
    decode = find(toto, "recompile", "toto/model/transformer.py:298", "tensor 'inputs' size mismatch at index 2")
    assert decode.values == ["8", "1"] and "prefill vs decode" in decode.detail
    limit = find(toto, "recompile_limit", "toto/model/backbone.py:232", "tensor 'inputs' size mismatch at index 2")
    assert limit.limit == 8 and limit.values == ["60", "64"]
    assert "every other shape or value now runs this frame eager" in limit.effect


# ---------------------------------------------------------------- upstream Kronos (context 8, max_context 15)


@pytest.fixture(scope="module")
def kronos(reference_logs):
    return analyze_file(reference_logs["kronos"])


def test_kronos_limit_hit_separate_from_recompiles(kronos, reference_logs):
    assert_counts_add_up(kronos, reference_logs["kronos"].read_text())
    assert kronos.totals()["recompile"] == 14 and kronos.totals()["recompile_limit"] == 1  # 15 "Recompiling"
    assert kronos.causes() == {"size_mismatch": {"recompile": 14}, "module_int_attribute": {"recompile_limit": 1}}


def test_kronos_growing_window_and_the_rotary_cache_attribute(kronos):
    kronos_py = "kronos_finance/_vendor/kronos_model/kronos.py"
    s1 = find(kronos, "recompile", f"{kronos_py}:276", "tensor 'stamp' size mismatch at index 1")
    s2 = find(kronos, "recompile", f"{kronos_py}:308", "tensor 'context' size mismatch at index 1")
    assert (s1.function, s2.function) == ("decode_s1", "decode_s2")
    assert s1.count == s2.count == 7 and s1.values == s2.values == [str(n) for n in range(8, 16)]
    assert "grows by 1" in s1.detail
    limit = next(g for g in kronos.groups if g.kind == "recompile_limit")
    assert (limit.function, limit.limit, limit.cause) == ("decode_s1", 8, "module_int_attribute")
    assert limit.pattern.endswith("._modules['rotary'].seq_len_cached == N") and limit.values == ["14"]
    assert limit.context.startswith("if seq_len != self.seq_len_cached:") and "HINT: torch.compile" in limit.context
    assert "now runs this frame eager" in limit.effect and "precompute" in limit.fix


# ---------------------------------------------------------------- several logs, folders, bad bytes


def test_folder_of_logs_grouped_across_files(reference_logs, kronos, toto, tmp_path):
    folder = tmp_path / "logs"
    (folder / "night").mkdir(parents=True)
    shutil.copy(reference_logs["kronos"], folder / "a.log")
    shutil.copy(reference_logs["kronos"], folder / "night" / "b.log")
    (folder / ".hidden.log").write_text("Recompiling function f in x.py:1\n")  # editor/OS files are skipped
    both = analyze_paths([folder, reference_logs["toto"]])
    assert [Path(s.path).name for s in both.sources] == ["a.log", "b.log", "toto.log"]
    assert both.totals() == {k: 2 * kronos.totals()[k] + toto.totals()[k] for k in kronos.totals()}
    s1 = next(g for g in both.groups if g.kind == "recompile" and g.function == "decode_s1")
    assert s1.count == 14 and sorted(Path(p).name for p in s1.sources) == ["a.log", "b.log"]
    assert set(s1.sources.values()) == {7}


def test_undecodable_bytes_are_replaced_and_counted(reference_logs, kronos, tmp_path):
    data = reference_logs["kronos"].read_bytes()
    first_newline = data.index(b"\n")
    broken = tmp_path / "tee.log"  # a stray byte first, and a multi-byte character cut before a line end
    broken.write_bytes(b"\xff" + data[:first_newline] + b"\xe2\x82" + data[first_newline:])
    a = analyze_file(broken)
    assert a.undecodable == 2 and a.totals() == kronos.totals()


def test_missing_or_empty_inputs_are_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="no such log file or folder"):
        analyze_paths([tmp_path / "recompile.log"])
    with pytest.raises(ConfigError, match="holds no log files"):
        analyze_paths([tmp_path])
    assert analyze_text("", "x").totals()["recompile"] == 0


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
