"""The tearsheet's views quantstats has (return distribution, end-of-year returns against the benchmark, rolling
beta, the benchmark's monthly returns) against quantstats 0.0.86 itself, the rolling chart's own volatility ticks,
and captions that say the scale the axis has."""

from __future__ import annotations

import math
from itertools import pairwise

import matplotlib
import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

# quantstats applies a seaborn theme to matplotlib's global rcParams on import; keep it out of other tests.
with matplotlib.rc_context():
    import quantstats as qs

from marketcast.report import figures
from marketcast.report.charts import linear_ticks
from marketcast.report.series import (
    BUY_AND_HOLD,
    WALK_FORWARD,
    return_bins,
    return_histogram,
)
from marketcast.report.series import rolling_beta as beta_of
from marketcast.report.tearsheet import scale_note
from tests.report.pagedata import figures as page_figures
from tests.report.pagedata import trace

REL = 1e-10


def _series(values, times) -> pd.Series:
    return pd.Series(np.asarray(values, dtype=np.float64), index=pd.DatetimeIndex(times).tz_localize(None))


def test_rolling_beta_is_quantstats_rolling_greeks_beta():
    rng = np.random.default_rng(46)
    times = pd.bdate_range("2020-01-01", periods=400)
    bench = rng.normal(0.0004, 0.012, 400)
    record = 0.6 * bench + rng.normal(0.0002, 0.006, 400)
    record[150:190] = 0.0  # flat stretch: the record does not trade
    ours = beta_of(record, bench, times, 63)
    theirs = qs.stats.rolling_greeks(_series(record, times), _series(bench, times), periods=63)["beta"]
    assert ours.iloc[:62].isna().all() and theirs.iloc[:62].isna().all()
    np.testing.assert_allclose(ours.to_numpy()[62:], theirs.to_numpy()[62:], rtol=REL, atol=0.0)
    slope = np.polyfit(bench[-63:], record[-63:], 1)[0]  # the least-squares slope of the last window
    assert ours.iloc[-1] == pytest.approx(slope, rel=1e-9)


def test_rolling_beta_is_nan_where_the_benchmark_does_not_move():
    times = pd.bdate_range("2021-01-01", periods=6)
    beta = beta_of(np.array([0.01, -0.02, 0.03, 0.0, 0.01, 0.02]), np.zeros(6), times, 3)
    assert beta.isna().all()


def test_the_return_histogram_shares_bins_and_sums_to_one():
    r = np.array([-0.02, -0.01, 0.0, 0.0, 0.01, 0.03, 0.05, 0.0, 0.0, 0.0, 0.0, -0.005])
    b = np.array([-0.03, 0.01, 0.02, 0.0, -0.01, 0.01, 0.02, 0.0, 0.01, -0.02, 0.0, 0.04])
    edges, rs, bs = return_histogram(r, b)
    assert return_bins(len(r)) == 10 and len(edges) == 11  # sqrt(12) rounds to 3: at least 10 bins
    assert edges[0] == -0.03 and edges[-1] == 0.05
    assert rs.sum() == pytest.approx(1.0) and bs.sum() == pytest.approx(1.0)
    assert edges[1] - edges[0] == pytest.approx(0.008)  # (0.05 - -0.03) / 10
    assert rs[3] == pytest.approx(7 / 12)  # [-0.006, 0.002): the six flat windows and -0.005
    assert return_bins(400) == 20 and return_bins(10_000) == 60


def test_the_pages_new_views_are_quantstats_numbers(page, reports):
    figs = page_figures(page)
    for i, rep in enumerate(reports):
        r, key = rep.result, f"s{i}-{rep.result.symbol}"
        wf = _series(r.walk_forward["returns"], r.settle_times)
        bh = _series(r.benchmark.returns, r.settle_times)

        yearly = figs[f"{key}-yearly"]
        for name, series in ((WALK_FORWARD, wf), (BUY_AND_HOLD, bh)):
            eoy = series.resample("YE").apply(qs.stats.comp)
            assert list(trace(yearly, name)["x"]) == [str(y) for y in eoy.index.year]
            np.testing.assert_allclose(trace(yearly, name)["y"], eoy.to_numpy(), rtol=REL)

        heat = figs[f"{key}-benchmark-monthly"]["data"][0]
        theirs = qs.stats.monthly_returns(bh, eoy=True, compounded=True)
        z = np.asarray(heat["z"], dtype=np.float64)
        months = theirs.drop(columns="EOY").to_numpy(dtype=np.float64)
        present = np.isfinite(z)  # quantstats writes 0 for a month without a window; ours leaves it empty
        np.testing.assert_allclose(z[present], months[present], rtol=REL)
        assert np.all(months[~present] == 0.0)
        assert [label.split(" ")[0] for label in heat["y"]] == [str(y) for y in theirs.index]

        beta = trace(figs[f"{key}-beta"], next(t["name"] for t in figs[f"{key}-beta"]["data"]))
        w = len(wf) - len(beta["y"]) + 1  # NaN until the window is full: dropped from the drawn line
        greeks = qs.stats.rolling_greeks(wf, bh, periods=w)["beta"].dropna()
        np.testing.assert_allclose(beta["y"], greeks.to_numpy(), rtol=1e-9)

        dist = figs[f"{key}-distribution"]
        shares = trace(dist, WALK_FORWARD)["y"]
        assert shares.sum() == pytest.approx(1.0) and trace(dist, BUY_AND_HOLD)["y"].sum() == pytest.approx(1.0)
        lines = sorted(s["x0"] for s in dist["layout"]["shapes"])
        assert lines == pytest.approx(sorted([wf.mean(), bh.mean()]))


def test_linear_ticks_are_round_steps_covering_the_range():
    assert linear_ticks(0.0, 0.2)["tickvals"] == [0.0, 0.05, 0.1, 0.15, 0.2]
    assert linear_ticks(0.0, 0.27)["tickvals"] == [0.0, 0.1, 0.2, 0.3]
    assert linear_ticks(0.0, 0.031)["tickvals"] == [0.0, 0.01, 0.02, 0.03, 0.04]
    assert linear_ticks(-1.2, 3.7)["tickvals"] == [-2.0, 0.0, 2.0, 4.0]
    assert linear_ticks(0.0, 0.27)["range"] == [0.0, 0.3]


def test_the_volatility_axis_has_its_own_round_ticks(page, reports):
    for i, rep in enumerate(reports):
        fig = page_figures(page)[f"s{i}-{rep.result.symbol}-rolling"]
        axis = fig["layout"]["yaxis2"]
        vol = next(t for t in fig["data"] if t.get("yaxis") == "y2")["y"]
        ticks = axis["tickvals"]
        step = ticks[1] - ticks[0]
        assert ticks[0] == 0.0 and ticks[-1] >= np.nanmax(vol) > ticks[-2]  # covers the curve, no tick to spare
        assert all(math.isclose(b - a, step, rel_tol=1e-9) for a, b in pairwise(ticks))
        mantissa = step / 10 ** math.floor(math.log10(step))
        assert any(math.isclose(mantissa, m) for m in (1.0, 2.0, 2.5, 5.0))


def test_captions_say_the_scale_the_axis_has(page, reports):
    linear, log = go.Figure(), go.Figure()
    log.update_yaxes(type="log")
    assert scale_note(linear).startswith("Linear scale") and scale_note(log).startswith("Log scale")
    figs = page_figures(page)
    for i, rep in enumerate(reports):
        key = f"s{i}-{rep.result.symbol}"
        for chart in ("overview", "equity"):
            is_log = figs[f"{key}-{chart}"]["layout"].get("yaxis", {}).get("type") == "log"
            caption = page.split(f'data-chart="{key}-{chart}">')[1].split("</figcaption>")[0]
            assert ("Log scale" in caption) == is_log and ("Linear scale" in caption) == (not is_log)


def test_a_wide_equity_curve_is_drawn_and_captioned_on_a_log_scale():
    fig = go.Figure()
    figures._log_when_wide(fig, np.array([1.0, 3.0, 40.0]))
    assert figures.is_log(fig) and scale_note(fig).startswith("Log scale")
