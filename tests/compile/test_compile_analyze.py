"""Recompile analyzer on real logs: toto-ts and upstream Kronos run under torch.compile in this session
(``conftest.reference_logs``).

Counts are checked against an oracle read straight from the raw text (line counts of each torch message), so
an event counted twice or lost fails the test whatever the grouping does.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from marketcast.compile.analyze import analyze_file, analyze_paths, analyze_text
from marketcast.errors import ConfigError
from tests.compile.log_oracle import assert_counts_add_up, where


def find(analysis, kind: str, location: str, pattern: str):
    matches = [g for g in analysis.groups if g.kind == kind and where(g) == location and g.pattern == pattern]
    assert len(matches) == 1, [(g.kind, where(g), g.pattern) for g in analysis.groups]
    return matches[0]


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
