"""Forecast fans: computed with the backtest, where they start and what they may read, and drawn from the store."""

import numpy as np
import pandas as pd
import pytest

from marketcast.backtest.engine import decision_rows
from marketcast.backtest.fans import (
    QUANTILES, check_span, fan_horizon, fan_rows, parse_dates, result_fans, stored_fans,
)
from marketcast.data.bars import Bars
from marketcast.errors import ConfigError, DataError
from marketcast.forecast.baseline import BaselineForecaster
from marketcast.report.series import fan_path
from tests.report.conftest import CONFIG


def test_dates_parse_to_utc_and_bad_ones_are_one_clear_error():
    assert parse_dates(["2018-11-01", "2018-11-02T15:30:00+01:00"]) == [
        pd.Timestamp("2018-11-01", tz="UTC"), pd.Timestamp("2018-11-02 14:30", tz="UTC")]
    assert parse_dates(None) == []
    with pytest.raises(ConfigError, match=r"--fan-date 'soon' is not a date; use YYYY-MM-DD"):
        parse_dates(["soon"])


def test_default_fans_are_spread_and_have_a_whole_realised_path(results, bars):
    r, b = results[0], bars[0]
    h = fan_horizon(r.windows)
    assert h == 20
    decisions = decision_rows(r, b)
    rows = fan_rows(decisions, b, horizon=h)
    assert len(rows) == 3 and rows[0] == decisions[0] and (rows + h <= len(b) - 1).all()
    assert rows[-1] == decisions[decisions + h <= len(b) - 1][-1]  # the last one with a whole path
    assert fan_horizon(r.windows, 100) == r.windows  # never longer than the run


def test_a_date_picks_the_last_decision_bar_at_or_before_it(results, bars):
    r, b = results[0], bars[0]
    saturday = r.decision_times[10] + pd.Timedelta("1D")
    while saturday.dayofweek != 5:
        saturday += pd.Timedelta("1D")
    friday = b.frame.index[b.frame.index <= saturday][-1]
    rows = fan_rows(decision_rows(r, b), b, [saturday, r.decision_times[3], r.decision_times[3]])
    assert b.frame.index[rows].tolist() == [r.decision_times[3], friday]  # sorted, duplicates once
    with pytest.raises(ConfigError, match=r"--fan-date 2001-01-02: SP500's backtest runs from 20\d\d-.* choose dates"):
        fan_rows(decision_rows(r, b), b, [pd.Timestamp("2001-01-02", tz="UTC")])
    with pytest.raises(ConfigError, match="choose dates in that span"):
        check_span([pd.Timestamp("2030-01-01", tz="UTC")], b, CONFIG, 3)
    check_span([r.decision_times[0], r.settle_times[-1]], b, CONFIG, 3)  # both ends are in


def test_fans_hold_ordered_quantiles_and_the_real_path(reports):
    for rep in reports:
        b = rep.bars.frame
        assert len(rep.fans) == 3
        for fan in rep.fans:
            t = b.index.get_loc(fan.decision_time)
            history, realised = fan_path(fan, rep.bars)
            assert history.index[-1] == fan.decision_time and history.iloc[-1] == b["close"].iloc[t]
            assert realised.tolist() == b["close"].iloc[t + 1:t + 21].tolist()
            assert fan.times.tolist() == b.index[t + 1:t + 21].tolist()  # XNYS calendar = the real bar times
            bands = np.array([fan.quantiles[q] for q in QUANTILES])
            assert bands.shape == (5, 20) and (np.diff(bands, axis=0) >= 0).all() and (bands > 0).all()


def test_a_fan_reads_no_bar_after_its_date(results, bars):
    """Perturb every bar after each fan's decision bar: its quantiles do not move."""
    r, b = results[0], bars[0]
    base = result_fans(BaselineForecaster(), r, b)
    for fan in base:
        t = b.frame.index.get_loc(fan.decision_time)
        frame = b.frame.copy()
        frame.iloc[t + 1:, :4] *= np.linspace(0.5, 2.0, len(frame) - t - 1)[:, None]
        other = Bars(b.symbol, frame, b.asset_class, b.source)
        again = result_fans(BaselineForecaster(), r, other, [fan.decision_time])[0]
        for q in QUANTILES:
            np.testing.assert_array_equal(again.quantiles[q], fan.quantiles[q])
        assert not np.array_equal(fan_path(again, other)[1].to_numpy(), fan_path(fan, b)[1].to_numpy())


def test_fans_refuse_bars_that_are_not_the_runs(results, bars):
    with pytest.raises(DataError, match="not the ones its backtest read"):
        result_fans(BaselineForecaster(), results[0], bars[1].head(len(bars[1]) - 1))


def test_stored_fans_are_drawn_and_other_dates_are_not_stored(results, bars):
    r, b = results[0], bars[0]
    assert stored_fans(r, b) == r.fans and len(r.fans) == 3
    second = r.fans[1].decision_time
    assert stored_fans(r, b, [second + pd.Timedelta("1h")]) == (r.fans[1],)  # its last decision bar is stored
    assert stored_fans(r, b, [r.decision_times[5]]) is None  # not stored: the command layer forecasts it
    with pytest.raises(ConfigError, match="choose dates in that span"):
        stored_fans(r, b, [pd.Timestamp("2001-01-02", tz="UTC")])
    assert stored_fans(type(r).__new__(type(r)), b) is None  # a run recorded before fans were stored
