"""Naive timestamps are UTC unless --timezone names their zone, and exchange-local intraday stock bars read as
UTC get one warning naming --timezone (they used to shift 4-5 hours without a word)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from marketcast.commands import main
from marketcast.data.load import load_bars
from marketcast.errors import ConfigError
from marketcast.sweep.spec import load_spec

ZONE = "America/New_York"


def _local_five_minute_bars(path, days=("2024-03-04", "2024-03-05", "2024-03-06", "2024-03-07", "2024-03-08"),
                            offset: str = "") -> pd.DatetimeIndex:
    """NYSE regular sessions of 5-minute bars written as New York wall-clock times (with ``offset`` appended)."""
    stamps = pd.DatetimeIndex([t for d in days for t in pd.date_range(f"{d} 09:30", f"{d} 15:55", freq="5min")])
    close = 100 + np.cumsum(np.random.default_rng(0).normal(0, 0.1, len(stamps)))
    pd.DataFrame({"timestamp": stamps.strftime("%Y-%m-%d %H:%M:%S") + offset, "open": close, "high": close + 0.1,
                  "low": close - 0.1, "close": close}).to_csv(path, index=False)
    return stamps


def test_local_intraday_stock_bars_read_as_utc_warn_once_naming_timezone(tmp_path, capsys):
    path = tmp_path / "AAPL.csv"
    _local_five_minute_bars(path)
    assert main(["data", "check", str(path), "--json"]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warned) == 1
    assert "read as UTC, which puts 77% of the bars outside the stock session" in warned[0]
    assert f"read as {ZONE} time 100% fall inside it: pass --timezone {ZONE}" in warned[0]


def test_timezone_sets_the_zone_of_naive_times(tmp_path, recwarn):
    path = tmp_path / "AAPL.csv"
    stamps = _local_five_minute_bars(path)
    bars = load_bars(path, timezone=ZONE)
    # before the 10 March 2024 DST change New York is UTC-5: 09:30 local is 14:30 UTC
    assert bars.frame.index[0] == pd.Timestamp("2024-03-04 14:30", tz="UTC")
    assert bars.frame.index.equals(stamps.tz_localize(ZONE).tz_convert("UTC").rename("timestamp"))
    assert bars.asset_class == "stock" and not [w for w in recwarn if "--timezone" in str(w.message)]


def test_times_with_an_offset_ignore_timezone(tmp_path):
    path = tmp_path / "AAPL.csv"
    _local_five_minute_bars(path, offset="-05:00")
    assert load_bars(path, timezone="Asia/Tokyo").frame.index[0] == pd.Timestamp("2024-03-04 14:30", tz="UTC")


def test_a_wall_time_the_zone_skips_is_named(tmp_path):
    path = tmp_path / "X.csv"
    pd.DataFrame({"timestamp": ["2024-03-10 01:30", "2024-03-10 02:30", "2024-03-10 03:30"], "open": 1.0,
                  "high": 1.0, "low": 1.0, "close": 1.0}).to_csv(path, index=False)
    with pytest.raises(Exception, match="2024-03-10 02:30 does not exist or repeats in America/New_York"):
        load_bars(path, timezone=ZONE, asset_class="crypto")


def test_an_unknown_zone_is_one_line_exit_2(tmp_path, capsys):
    path = tmp_path / "AAPL.csv"
    _local_five_minute_bars(path)
    assert main(["data", "check", str(path), "--timezone", "Mars/Olympus"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: --timezone 'Mars/Olympus' is not an IANA time zone; use a name such as America/New_York, "
        "Europe/London or UTC"]


@pytest.mark.parametrize("command", [["backtest", "--output-dir", "{out}"], ["forecast", "SP500"],
                                     ["sweep", "{spec}", "--local", "--store", "{out}"]])
def test_every_command_with_timezone_refuses_an_unknown_zone_before_work(tmp_path, capsys, monkeypatch, command):
    """The embedded data carries its own zone and never reached the loaders' check: ``backtest --timezone
    Mars/Olympus`` ran and exited 0. The option itself now refuses it, whatever the data."""
    out, spec = tmp_path / "out", tmp_path / "spec.toml"
    spec.write_text('[data]\nsymbols = ["SP500"]\n[options]\nwindows = 3\n')
    monkeypatch.chdir(tmp_path)
    assert main([a.format(out=out, spec=spec) for a in command] + ["--timezone", "Mars/Olympus"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--timezone 'Mars/Olympus' is not an IANA time zone" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.toml"]


def test_a_sweep_reads_its_data_timezone_into_every_cell(tmp_path):
    (tmp_path / "bars").mkdir()
    _local_five_minute_bars(tmp_path / "bars" / "AAPL.csv")
    spec = tmp_path / "s.toml"
    spec.write_text(f'[data]\nsymbols = ["AAPL"]\ndir = "bars"\ntimezone = "{ZONE}"\n[options]\nwindows = 20\n')
    cells = load_spec(spec).cells()
    assert {c.timezone for c in cells} == {ZONE}
    assert load_spec(spec, timezone="UTC").cells()[0].cell_id != cells[0].cell_id
    spec.write_text('[data]\nsymbols = ["AAPL"]\ndir = "bars"\ntimezone = "Nowhere"\n')
    with pytest.raises(ConfigError, match="'Nowhere' is not an IANA time zone"):
        load_spec(spec)


def test_a_backtest_records_its_timezone_and_report_reads_the_bars_again_with_it(tmp_path, capsys, monkeypatch):
    path = tmp_path / "AAPL.csv"
    _local_five_minute_bars(path)
    monkeypatch.setenv("MARKETCAST_RUN_STORE", str(tmp_path / "runs"))
    assert main(["backtest", str(path), "--windows", "20", "--samples", "16", "--no-spa", "--timezone", ZONE,
                 "--output-dir", str(tmp_path / "out"), "--json"]) == 0
    assert "--timezone" not in capsys.readouterr().err  # read in its zone: no warning
    assert main(["runs", "query", "SELECT timezone FROM cells", "--json"]) == 0
    assert '"timezone": "America/New_York"' in capsys.readouterr().out
    # report reads the bars again as the run did: in New York time, so their content hash matches
    assert main(["report", "latest", "--output-dir", str(tmp_path / "page")]) == 0
