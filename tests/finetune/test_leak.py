"""Leak-proof by construction: tuned weights are never scored on the bars they were tuned on."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd
import pytest

from marketcast.commands import main
from marketcast.data import load_symbol
from marketcast.errors import ConfigError, DataWarning, ModelLoadError
from marketcast.forecast.tuning import (
    IN_SAMPLE, OTHER_SYMBOL, OUT_OF_SAMPLE, fingerprint, guard_windows, read_tuning,
)
from marketcast.schemas import load as load_schema
from tests.finetune.conftest import UNTIL, planted

FAST = ["--model", "toto", "--samples", "16", "--context", "32"]


def test_fingerprint_covers_the_bars_up_to_until_only():
    frame = planted()
    until = frame.index[300].date()
    base = fingerprint(frame, until)
    assert base == fingerprint(frame.copy(), until) and len(base) == 64
    later = frame.copy()
    later.iloc[301, later.columns.get_loc("close")] *= 1.5  # after until: not a bar that was tuned on
    assert fingerprint(later, until) == base
    edited = frame.copy()
    edited.iloc[300, edited.columns.get_loc("low")] *= 0.999  # on until: it was
    assert fingerprint(edited, until) != base
    shifted = frame.copy()
    shifted.index = shifted.index + pd.Timedelta(hours=1)
    assert fingerprint(shifted, until) != base


def test_guard_labels_each_symbol_and_refuses_the_first_in_sample_window(tuned, data_dir):
    tuning = read_tuning(str(tuned))
    frame = load_symbol("SYN", data_dir=data_dir).frame
    other = load_symbol("OTHER", data_dir=data_dir).frame
    after, across = frame.index[301:320], frame.index[295:320]
    assert guard_windows(tuning, [("SYN", frame, after), ("OTHER", other, other.index[:50])]) == {
        "SYN": OUT_OF_SAMPLE, "OTHER": OTHER_SYMBOL}
    with pytest.raises(ConfigError) as info:
        guard_windows(tuning, [("SYN", frame, across)])
    assert str(info.value) == (
        f"SYN: window 1 (decision bar 2021-02-17) is on or before {UNTIL}, the last day the weights in {tuned} were "
        "tuned on; test after it (--start 2021-02-25) or pass --allow-in-sample to see in-sample results")
    with pytest.warns(UserWarning, match=r"^SYN: 6 of 25 windows \(decision bars 2021-02-17 to 2021-02-24\) are in "
                                         "sample"):
        assert guard_windows(tuning, [("SYN", frame, across)], allow_in_sample=True) == {"SYN": IN_SAMPLE}
    assert guard_windows(None, [("SYN", frame, across)]) == {}  # untuned weights: nothing to check


def test_a_changed_data_file_is_detected_by_its_fingerprint(tuned, data_dir):
    tuning = read_tuning(str(tuned))
    frame = load_symbol("SYN", data_dir=data_dir).frame.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        guard_windows(tuning, [("SYN", frame, frame.index[301:320])])  # unchanged: silent
    frame.iloc[10, frame.columns.get_loc("close")] += 0.01
    with pytest.warns(DataWarning, match=r"^SYN: its bars up to 2021-02-24 differ from the ones the weights in .* "
                                         r"were tuned on \(fingerprint changed since tuning\)"):
        guard_windows(tuning, [("SYN", frame, frame.index[301:320])])


def test_weights_without_a_record_and_unreadable_records(tmp_path, tiny_base):
    assert read_tuning(None) is None and read_tuning("auto") is None and read_tuning(str(tiny_base)) is None
    (tmp_path / "tuning.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match="tuning.json: not a readable tuning record"):
        read_tuning(str(tmp_path))


def test_a_backtest_of_tuned_weights_before_until_is_refused_in_one_line(tuned, data_dir, tmp_path, capsys):
    out = tmp_path / "bt"
    code = main(["backtest", "SYN", "--data-dir", str(data_dir), *FAST, "--weights", str(tuned),
                 "--start", "2021-02-01", "--end", "2021-03-05", "--output-dir", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert err == (f"error: SYN: window 1 (decision bar 2021-02-01) is on or before {UNTIL}, the last day the weights "
                   f"in {tuned} were tuned on; test after it (--start 2021-02-25) or pass --allow-in-sample to see "
                   "in-sample results\n")


def test_allow_in_sample_runs_them_marked_and_other_symbols_pass(tuned, data_dir, tmp_path, capsys):
    code = main(["backtest", "SYN", "OTHER", "--data-dir", str(data_dir), *FAST, "--weights", str(tuned),
                 "--start", "2021-02-18", "--end", "2021-03-05", "--allow-in-sample",
                 "--output-dir", str(tmp_path / "bt")])
    err = capsys.readouterr().err
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.startswith("warning:")]
    assert lines == ["warning: SYN: 5 of 12 windows (decision bars 2021-02-18 to 2021-02-24) are in sample: the "
                     f"weights in {tuned} were tuned on them; their scores flatter the model"]


def test_in_sample_windows_are_marked_in_every_report(tuned, data_dir, tmp_path, capsys):
    """Terminal, JSON, summary.md and the tearsheet's trust box all say which windows the weights saw."""
    import jsonschema

    out = tmp_path / "bt"
    code = main(["backtest", "SYN", "OTHER", "--data-dir", str(data_dir), *FAST, "--weights", str(tuned),
                 "--start", "2021-02-18", "--end", "2021-03-05", "--allow-in-sample", "--html",
                 "--output-dir", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    # 2021-02-18 .. 2021-02-24 are the 5 decision bars on or before UNTIL of the 12 (see the warning above)
    syn = (f"in sample: 5 of 12 windows have a decision bar on or before {UNTIL}, the last day the weights were "
           "tuned on; their scores flatter the model")
    other = f"out of sample, other symbol: the weights were tuned (up to {UNTIL}) on other symbols only"
    terminal = " ".join(captured.out.split())
    assert f"SYN: {syn}" in terminal and f"OTHER: {other}" in terminal
    schema = load_schema("backtest")
    reports = {s: json.loads((out / "latest" / f"{s}.json").read_text()) for s in ("SYN", "OTHER")}
    jsonschema.validate(list(reports.values()), schema)
    assert {s: (r["sample"], r["in_sample_windows"], r["tuned_until"]) for s, r in reports.items()} == {
        "SYN": (IN_SAMPLE, 5, UNTIL), "OTHER": (OTHER_SYMBOL, 0, UNTIL)}
    summary = (out / "latest" / "summary.md").read_text()
    assert f"> warning: {syn}." in summary and f"> {other}." in summary
    page = (out / "latest" / "report.html").read_text()
    assert f'<dd class="warning">{syn}</dd>' in page and f"<dt>Sample</dt><dd>{other}</dd>" in page


def test_untuned_weights_report_no_sample_label(data_dir, tiny_base, tmp_path, capsys):
    out = tmp_path / "bt"
    assert main(["backtest", "SYN", "--data-dir", str(data_dir), *FAST, "--weights", str(tiny_base),
                 "--start", "2021-02-18", "--end", "2021-03-05", "--output-dir", str(out)]) == 0
    report = json.loads((out / "latest" / "SYN.json").read_text())
    assert not {"sample", "in_sample_windows", "tuned_until"} & set(report)
    assert "in sample:" not in capsys.readouterr().out and "tuned on" not in (out / "latest" / "summary.md").read_text()


def _sweep_spec(tmp_path, data_dir, weights, start: str) -> Path:
    path = tmp_path / "tuned.toml"
    path.write_text(f"""name = "tuned"
[data]
symbols = ["OTHER", "SYN"]
dir = "{data_dir}"
start = "{start}"
end = "2021-03-05"
[options]
num_samples = 16
context = 32
[grid]
model = ["toto"]
[models.toto]
weights = "{weights}"
""")
    return path


def test_a_sweep_of_tuned_weights_before_until_is_refused_before_any_cell_runs(tuned, data_dir, tmp_path, capsys):
    # OTHER first: the spec check (one symbol) passes; the whole-spec check refuses SYN before Ray or the store
    path = _sweep_spec(tmp_path, data_dir, tuned, "2021-02-18")
    assert main(["sweep", str(path), "--store", str(tmp_path / "store"), "--local"]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {path}: SYN: window 1 (decision bar 2021-02-18) is on or before {UNTIL}, the last day "
                   f"the weights in {tuned} were tuned on; test after it ([data] start = \"2021-02-25\")\n")
    assert not (tmp_path / "store").exists()


def test_a_sweep_after_until_or_of_untuned_weights_passes_the_check(tuned, tiny_base, data_dir, tmp_path):
    from marketcast.sweep.spec import load_spec

    after = load_spec(_sweep_spec(tmp_path, data_dir, tuned, "2021-02-25")).cells()
    assert sorted(c.symbol for c in after) == ["OTHER", "SYN"] and {c.config.windows for c in after} == {7}
    before = load_spec(_sweep_spec(tmp_path, data_dir, tiny_base, "2021-02-18")).cells()
    assert {c.config.windows for c in before} == {12}  # the same windows with untuned weights: no check


def test_models_compare_refuses_to_rank_tuned_weights_on_their_own_bars(tuned, data_dir, tmp_path, capsys):
    store = tmp_path / "store"
    code = main(["models", "compare", "--symbols", "SYN", "--models", "baseline,toto", "--weights", f"toto={tuned}",
                 "--data-dir", str(data_dir), "--windows", "200", "--samples", "16", "--context", "32",
                 "--store", str(store)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and not store.exists()
    assert err.startswith("error: SYN: window 1 (decision bar ") and f"is on or before {UNTIL}" in err
    assert err.rstrip().endswith("rank them on symbols they were not tuned on, or on bars from 2021-02-25 on")
