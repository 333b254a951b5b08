"""``--start/--end`` and ``--windows all`` (marketcast.backtest.period): the windows whose decision bar falls in
the period, the same windows as ``--windows N`` when they cover the same bars, and nothing read after the
period's last settlement bar."""

from __future__ import annotations

import json
from datetime import date

import pytest

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.engine import decision_ends
from marketcast.backtest.period import ALL, Period, cut_at, windows_of
from marketcast.commands import main
from marketcast.data.bars import Bars
from marketcast.errors import ConfigError, DataError
from marketcast.forecast.registry import load_forecaster
from tests.conftest import make_ohlcv

FAST = ["--samples", "16", "--context", "64", "--no-spa"]
VOLATILE = ("generated_at", "run_id")  # the only keys two equal runs may differ in


def _bars(n: int = 10) -> Bars:
    return Bars(symbol="X", frame=make_ohlcv(n, seed=1))


def _day(bars: Bars, row: int) -> date:
    return bars.frame.index[row].date()


def _stable(doc: dict) -> dict:
    """A run's JSON without what two equal runs may differ in: the clock, the run id, the forecast's latency."""
    meta = {k: v for k, v in doc.get("forecast_meta", {}).items() if k != "latency_s"}
    return {**{k: v for k, v in doc.items() if k not in VOLATILE}, "forecast_meta": meta}


def _json(capsys, *args: str) -> list[dict]:
    capsys.readouterr()
    assert main(["backtest", *args, *FAST, "--json"]) == 0
    return [_stable(doc) for doc in json.loads(capsys.readouterr().out)]


def test_a_period_keeps_the_windows_whose_decision_bar_falls_in_it():
    bars = _bars(10)  # daily, rows 0..9: with 2 bars of history the decision bars are rows 1..8
    assert windows_of(bars, Period.of(ALL), 2) == (bars, 8)
    assert windows_of(bars, Period.of(ALL), 4)[1] == 6  # rows 3..8
    cut, n = windows_of(bars, Period.of(start=_day(bars, 3), end=_day(bars, 5)), 2)
    assert (len(cut), n) == (7, 3)  # through row 6, the settlement bar of row 5
    assert list(decision_ends(len(cut), BacktestConfig(windows=n), 2)) == [3, 4, 5, 6]  # 6: the next decision
    cut, n = windows_of(bars, Period.of(start=_day(bars, 0)), 4)  # opens before the first decidable bar
    assert (len(cut), n) == (10, 6)
    cut, n = windows_of(bars, Period.of(end=_day(bars, 4)), 2)
    assert (len(cut), n) == (6, 4)  # rows 1..4
    assert windows_of(bars, Period.of(7, None, None), 2) == (bars, 7)
    assert Period.of(None, None, None, default=70).fixed == 70


@pytest.mark.parametrize("given,message", [
    ({"windows": 5, "start": "2024-01-02"}, "give --windows or --start/--end, not both"),
    ({"start": "2024-01-05", "end": "2024-01-04"}, "--end 2024-01-04 is before --start 2024-01-05"),
    ({"start": "2024-1-5"}, "--start '2024-1-5': give a date as YYYY-MM-DD"),
    ({"windows": "0"}, "--windows 0: give a whole number >= 1, or 'all'"),
])
def test_conflicting_or_malformed_periods_are_one_line(given, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Period.of(**given)


def test_a_period_without_a_window_says_what_the_context_needs():
    bars = _bars(10)
    with pytest.raises(DataError) as caught:
        windows_of(bars, Period.of(start="2023-01-01", end=_day(bars, 2)), 4)
    assert str(caught.value) == (f"X (bars): no window has its decision bar in 2023-01-01 to {_day(bars, 2)}; with "
                                 f"4 bars of history for the first window, decision bars run {_day(bars, 3)} to "
                                 f"{_day(bars, 8)}; pick dates in that range")
    with pytest.raises(DataError, match="the first needs 12 bars of history"):
        windows_of(bars, Period.of(ALL), 12)
    assert len(cut_at(bars, _day(bars, 6))) == 7
    with pytest.raises(DataError, match="leaves 0 bars"):
        cut_at(bars, date(2023, 1, 1))


def test_start_end_to_the_last_settled_bar_equals_windows_n(tmp_path, capsys):
    path = tmp_path / "ABC.csv"
    frame = make_ohlcv(120, seed=3, freq="B")
    frame.to_csv(path)
    out = ["--output-dir", str(tmp_path / "o")]
    last_n = _json(capsys, str(path), "--windows", "12", *out)
    first, last = frame.index[120 - 1 - 12], frame.index[-2]  # rows 107..118, each settled on the next row
    assert (last_n[0]["first_decision"], last_n[0]["runs"]) == (first.isoformat(), 12)
    dated = _json(capsys, str(path), "--start", f"{first:%Y-%m-%d}", "--end", f"{last:%Y-%m-%d}", *out)
    assert dated == last_n
    assert _json(capsys, str(path), "--start", f"{first:%Y-%m-%d}", *out) == last_n


def test_a_past_period_reads_nothing_after_it_and_equals_the_cut_file(tmp_path, capsys):
    frame = make_ohlcv(120, seed=3, freq="B")
    first, last = frame.index[60], frame.index[71]  # 12 windows, the last settled on row 72
    period = ["--start", f"{first:%Y-%m-%d}", "--end", f"{last:%Y-%m-%d}"]
    (tmp_path / "a").mkdir()
    frame.to_csv(tmp_path / "a" / "ABC.csv")
    dated = _json(capsys, str(tmp_path / "a" / "ABC.csv"), *period, "--output-dir", str(tmp_path / "o"))
    assert (dated[0]["runs"], dated[0]["first_decision"], dated[0]["last_settle"]) == (
        12, first.isoformat(), frame.index[72].isoformat())
    perturbed = frame.copy()
    perturbed.iloc[73:, :4] *= 3.0  # the future after the period's last settlement bar
    (tmp_path / "b").mkdir()
    perturbed.to_csv(tmp_path / "b" / "ABC.csv")
    assert _json(capsys, str(tmp_path / "b" / "ABC.csv"), *period, "--output-dir", str(tmp_path / "o")) == dated
    (tmp_path / "c").mkdir()
    frame.iloc[:73].to_csv(tmp_path / "c" / "ABC.csv")
    cut = _json(capsys, str(tmp_path / "c" / "ABC.csv"), "--windows", "12", "--output-dir", str(tmp_path / "o"))
    how = ("periods_per_year_how", "data_warnings")  # the period keeps the whole file's annualisation notes
    assert "119 gaps" in dated[0][how[0]] and "72 gaps" in cut[0][how[0]]
    assert {**cut[0], **dict.fromkeys(how)} == {**dated[0], **dict.fromkeys(how)}


def test_windows_all_uses_every_window_the_history_allows(tmp_path, capsys):
    path = tmp_path / "ABC.csv"
    make_ohlcv(60, seed=2, freq="B").to_csv(path)
    need = load_forecaster("baseline").min_context
    every = _json(capsys, str(path), "--windows", "all", "--output-dir", str(tmp_path / "o"))
    assert every[0]["runs"] == 60 - need
    assert _json(capsys, str(path), "--windows", str(60 - need), "--output-dir", str(tmp_path / "o")) == every
    assert main(["backtest", str(path), "--windows", str(60 - need + 1), *FAST]) == 2


def test_symbols_whose_periods_hold_different_counts_run_together(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    make_ohlcv(60, seed=2, freq="B").to_csv(tmp_path / "d" / "ABC.csv")
    make_ohlcv(40, seed=5, freq="B").to_csv(tmp_path / "d" / "XYZ.csv")
    docs = _json(capsys, "ABC", "XYZ", "--data-dir", str(tmp_path / "d"), "-n", "all",
                 "--output-dir", str(tmp_path / "o"))
    need = load_forecaster("baseline").min_context
    assert [(d["symbol"], d["runs"]) for d in docs] == [("ABC", 60 - need), ("XYZ", 40 - need)]
    alone = _json(capsys, "XYZ", "--data-dir", str(tmp_path / "d"), "-n", str(40 - need),
                  "--output-dir", str(tmp_path / "o"))
    assert docs[1] == alone[0]


@pytest.mark.parametrize("args,message", [
    (["-n", "12", "--start", "2024-01-02"], "error: give --windows or --start/--end, not both"),
    (["--start", "2024-03-01", "--end", "2024-02-01"], "error: --end 2024-02-01 is before --start 2024-03-01"),
    (["--start", "1990-01-01", "--end", "1990-12-31"], "no window has its decision bar in 1990-01-01 to 1990-12-31"),
    (["--start", "31/01/2024"], "'31/01/2024': give a date as YYYY-MM-DD"),
    (["--windows", "most"], "give a whole number >= 1, or 'all'"),
])
def test_bad_periods_on_the_command_line_are_one_line_and_exit_2(tmp_path, capsys, args, message):
    path = tmp_path / "ABC.csv"
    make_ohlcv(60, seed=2, freq="B").to_csv(path)
    capsys.readouterr()
    assert main(["backtest", str(path), *args, *FAST, "--output-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()


def _forecast(capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main(["forecast", *args, "--json"]) == 0
    return _stable(json.loads(capsys.readouterr().out))


def test_forecast_end_picks_the_last_bar_and_calibration_takes_a_period(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    frame = make_ohlcv(120, seed=3, freq="B")
    frame.to_csv(tmp_path / "a" / "ABC.csv")
    frame.iloc[:90].to_csv(tmp_path / "b" / "ABC.csv")
    day = f"{frame.index[89]:%Y-%m-%d}"
    fan = _forecast(capsys, "ABC", "--data-dir", str(tmp_path / "a"), "--end", day, "-s", "32", "-c", "64")
    assert fan["last_bar"] == frame.index[89].isoformat()
    assert fan == _forecast(capsys, "ABC", "--data-dir", str(tmp_path / "b"), "-s", "32", "-c", "64")
    calib = ["--calibration", "-s", "16", "-c", "64"]
    dated = _forecast(capsys, "ABC", "--data-dir", str(tmp_path / "a"), *calib, "--start",
                      f"{frame.index[80]:%Y-%m-%d}", "--end", f"{frame.index[88]:%Y-%m-%d}")
    assert (dated["runs"], dated["first_decision"]) == (9, frame.index[80].isoformat())
    assert dated == _forecast(capsys, "ABC", "--data-dir", str(tmp_path / "b"), *calib, "-n", "9")
    need = load_forecaster("baseline").min_context
    assert _forecast(capsys, "ABC", "--data-dir", str(tmp_path / "b"), *calib, "-n", "all")["runs"] == 90 - need
    capsys.readouterr()
    assert main(["forecast", "ABC", "--data-dir", str(tmp_path / "a"), "--start", day]) == 2
    assert capsys.readouterr().err.strip() == ("error: --start picks the windows --calibration scores; add "
                                               "--calibration, or use --end alone to forecast from an earlier bar")
