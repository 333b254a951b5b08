"""The context a backtest actually used (marketcast.backtest.context): each window ending at row t reads
min(context, t + 1) real bars, the reports say the range instead of the context asked for, one warning per symbol
counts the windows that read fewer bars than --context, and --min-context N skips the windows with fewer than N.

The file: the embedded SP500's first 362 daily bars (NYSE sessions, so no other data warning). With the baseline
(its own minimum: 3 bars) and ``--windows all`` the decision rows run from 2 (3 bars) to 360 (361 bars; row 361
has no bar t+1): 359 windows, every one short of --context 512.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace

import numpy as np
import pytest

from marketcast.backtest import context
from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.engine import run_many
from marketcast.backtest.period import ALL, Period
from marketcast.backtest.prepare import prepare
from marketcast.commands import main
from marketcast.data import load_symbol
from marketcast.data.bars import Bars
from marketcast.errors import ConfigError, DataError
from marketcast.forecast.baseline import BaselineForecaster
from marketcast.runs.codec import decode, encode

N = 362
FAST = ["--samples", "16", "--no-spa"]


@pytest.fixture(scope="module")
def short_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("bars") / "SHORT.csv"
    load_symbol("SP500").frame.iloc[:N].to_csv(path)
    return path


def _run(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["backtest", *args])
    got = capsys.readouterr()
    return code, got.out, got.err


def test_each_window_reads_min_context_and_t_plus_one_bars():
    assert list(context.seen(np.array([0, 2, 63, 64, 500]), 64)) == [1, 3, 64, 64, 64]
    assert context.span(3, 361, 512) == "3–361 of 512"
    assert context.span(300, 300, 512) == "300 of 512"
    assert context.span(512, 512, 512) == "512"  # the whole context everywhere: the text it always was
    assert context.describe([np.array([5, 6]), None, np.array([40, 41])], 64) == "5–41 of 64"
    assert context.describe([None], 64) == "64"  # a result stored before the count was kept
    assert context.warning(np.array([62, 63, 64, 64]), 64).startswith(
        "2 of 4 windows saw fewer than the 64 bars of context asked for (context 62–64 of 64 bars)")
    assert context.warning(np.array([64, 64]), 64) == ""
    assert context.summary(np.array([62, 63, 64]), 64) == {"min": 62, "max": 64, "of": 64, "short_windows": 2}


def test_min_context_defaults_to_the_model_and_never_goes_below_it():
    assert context.needed(None, 3) == 3 and context.needed(None, 1) == 2  # every model needs one move
    assert context.needed(100, 3) == 100
    with pytest.raises(ConfigError, match="--min-context 5 is below the model's own minimum of 10 real bars"):
        context.needed(5, 10)
    bars = Bars("SHORT", load_symbol("SP500").frame.iloc[:N])
    with pytest.raises(ConfigError, match="below the model's own minimum of 10"):  # checked before any forecast
        prepare([bars], Period(ALL), BacktestConfig(min_context=5), min_context=10)


@pytest.mark.parametrize("value,message", [
    (2, "--min-context 2: a window needs at least 3 real bars; give a whole number >= 3"),
    (0, "--min-context 0: a window needs at least 3 real bars"),
    (600, "--min-context 600 exceeds --context 512: no window holds more than --context bars"),
])
def test_a_min_context_outside_3_to_context_is_refused_by_the_config(value, message):
    with pytest.raises(ConfigError, match=message):
        BacktestConfig(min_context=value)


def test_windows_all_on_362_bars_reads_3_to_361_of_512():
    bars = Bars("SHORT", load_symbol("SP500").frame.iloc[:N])
    config = BacktestConfig(num_samples=16, spa=False)
    prepared = prepare([bars], Period(ALL), config, min_context=BaselineForecaster.min_context)
    (result,) = run_many(prepared.bars, BaselineForecaster(), prepared.configs[0])
    assert result.windows == 359
    np.testing.assert_array_equal(result.context_seen, np.arange(3, 362))  # row t reads t + 1 bars
    assert result.context_text == "3–361 of 512"
    assert result.context_warning.startswith("359 of 359 windows saw fewer than the 512 bars")

    skipped = prepare([bars], Period(ALL), replace(config, min_context=100), min_context=3)
    (fewer,) = run_many(skipped.bars, BaselineForecaster(), skipped.configs[0])
    assert fewer.windows == 359 - 97  # rows 2..98 are skipped: the first decision is row 99, with 100 bars
    assert fewer.decision_times[0] == bars.frame.index[99]
    assert (int(fewer.context_seen[0]), fewer.context_text) == (100, "100–361 of 512")
    # the windows kept are the same windows, decided the same way
    assert fewer.views == result.views[97:]


def test_the_tearsheet_says_the_range_and_lists_the_warning():
    from marketcast.backtest.fans import add_fans
    from marketcast.report.overview import trust_box, warnings_of
    from marketcast.report.tearsheet import symbol_reports, tearsheet_html

    bars = Bars("SHORT", load_symbol("SP500").frame.iloc[:N])
    prepared = prepare([bars], Period(ALL), BacktestConfig(num_samples=16, spa=False), min_context=3)
    (result,) = run_many(prepared.bars, BaselineForecaster(), prepared.configs[0])
    assert "walk-forward windows of 1d bars; context 3–361 of 512 bars, 16 samples" in trust_box(result)
    assert result.context_warning in warnings_of(result)
    add_fans([result], [bars], BaselineForecaster())  # the job stores them; the page only draws
    page = tearsheet_html(symbol_reports([result], [bars]))
    assert "point forecast median, context 3–361 of 512, fill mode" in page


def test_the_report_says_the_range_and_warns_once(short_file, tmp_path, capsys):
    out_dir = tmp_path / "out"
    code, out, err = _run(capsys, str(short_file), "--windows", "all", *FAST, "--output-dir", str(out_dir))
    assert code == 0
    warnings = [line for line in (out + err).splitlines() if line.startswith("warning:")]
    assert warnings == [("warning: SHORT: 359 of 359 windows saw fewer than the 512 bars of context asked for "
                         "(context 3–361 of 512 bars); --min-context N skips windows with fewer than N bars")]
    doc = json.loads((out_dir / "latest" / "SHORT.json").read_text())
    assert doc["runs"] == 359 and doc["config"]["min_context"] is None
    assert {k: doc["context_seen"][k] for k in ("min", "max", "of", "short_windows")} == {
        "min": 3, "max": 361, "of": 512, "short_windows": 359}
    assert doc["context_seen"]["warning"] == warnings[0].removeprefix("warning: SHORT: ")
    summary = (out_dir / "latest" / "summary.md").read_text()
    assert "context 3–361 of 512, fill mode" in summary and "> warning: 359 of 359 windows" in summary

    from marketcast.runs.store import RunStore

    row = RunStore(os.environ["MARKETCAST_RUN_STORE"]).query(
        'SELECT "context_seen.min" AS lo, "context_seen.max" AS hi, "context_seen.short_windows" AS short, '
        "record FROM cells WHERE strategy IS NULL ORDER BY finished_at DESC LIMIT 1")
    assert (row["lo"][0], row["hi"][0], row["short"][0]) == (3, 361, 359)
    stored = decode(row["record"][0])  # `report RUN` re-makes the reports from it
    assert stored.context_text == "3–361 of 512" and stored.context_warning == doc["context_seen"]["warning"]


def test_min_context_skips_the_short_windows_on_the_command_line(short_file, tmp_path, capsys):
    code, out, _ = _run(capsys, str(short_file), "--windows", "all", "--min-context", "100", *FAST, "--json",
                        "--output-dir", str(tmp_path / "o"))
    (doc,) = json.loads(out)
    assert code == 0 and doc["runs"] == 262 and doc["config"]["min_context"] == 100
    assert (doc["context_seen"]["min"], doc["context_seen"]["max"]) == (100, 361)
    assert doc["first_decision"] == load_symbol("SP500").frame.index[99].isoformat()
    # a fixed count that no longer fits names --min-context
    code, _, err = _run(capsys, str(short_file), "--windows", "300", "--min-context", "100", *FAST,
                        "--output-dir", str(tmp_path / "never"))
    assert code == 2 and err.strip().splitlines() == [
        "error: SHORT (" + str(short_file) + "): 362 bars fit at most 262 windows, not 300 (--min-context 100: the "
        "first needs 100 bars of history and the bar after it); use --windows 262 or fewer or a lower --min-context"]
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize("args,message", [
    (["--min-context", "2"], "error: --min-context 2: a window needs at least 3 real bars"),
    (["--min-context", "-1"], "error: --min-context -1: a window needs at least 3 real bars"),
    (["--min-context", "65", "--context", "64"], "error: --min-context 65 exceeds --context 64"),
])
def test_a_bad_min_context_is_one_line_exit_2_and_no_output(short_file, tmp_path, capsys, args, message):
    code, out, err = _run(capsys, str(short_file), *args, *FAST, "--output-dir", str(tmp_path / "never"))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith(message)
    assert not (tmp_path / "never").exists()


def test_a_run_that_read_the_whole_context_says_what_it_always_said(tmp_path, capsys):
    code, out, err = _run(capsys, "SP500", "--windows", "20", "--context", "64", *FAST, "--output-dir",
                          str(tmp_path / "o"))
    assert code == 0 and "warning" not in out + err
    doc = json.loads((tmp_path / "o" / "latest" / "SP500.json").read_text())
    assert doc["context_seen"] == {"min": 64, "max": 64, "of": 64, "short_windows": 0, "warning": None}
    assert "context 64, fill mode" in (tmp_path / "o" / "latest" / "summary.md").read_text()


def test_a_result_stored_before_the_count_was_kept_reads_as_the_context_asked_for():
    bars = Bars("SHORT", load_symbol("SP500").frame.iloc[:200])
    (result,) = run_many([bars], BaselineForecaster(), BacktestConfig(windows=10, context=64, num_samples=8,
                                                                      spa=False))
    doc = json.loads(encode(result))
    del doc["fields"]["context_seen"]
    del doc["fields"]["config"]["fields"]["min_context"]
    old = decode(json.dumps(doc))
    assert (old.context_text, old.context_warning, old.config.min_context) == ("64", "", None)


def test_forecast_calibration_takes_min_context(short_file, capsys):
    data = ["--data-dir", str(short_file.parent)]
    capsys.readouterr()
    assert main(["forecast", "SHORT", *data, "--calibration", "-n", "all", "--min-context", "100", "-s", "16",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["runs"] == 262 and (doc["context_seen"]["min"], doc["context_seen"]["max"]) == (100, 361)
    assert main(["forecast", "SHORT", *data, "--min-context", "100"]) == 2
    assert capsys.readouterr().err.strip() == ("error: --windows and --min-context pick the windows --calibration "
                                               "scores; add --calibration")


def test_a_period_too_short_for_min_context_is_one_line():
    bars = Bars("SHORT", load_symbol("SP500").frame.iloc[:N])
    with pytest.raises(DataError, match="362 bars hold no window; the first needs 362 bars of history"):
        prepare([bars], Period(ALL), BacktestConfig(min_context=362), min_context=3)
