"""Joint paths from marginal quantiles (marketcast.forecast.copula): a synthetic series with a known Gaussian
copula gives back its rank correlation, every marginal is the model's own, every path is a bar, and on the
embedded data the share of bars where both MaxDiff limits fill matches the real bars'."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm, spearmanr

from marketcast.forecast.base import ContextBatch, make_batch
from marketcast.forecast.copula import (
    MIN_BARS,
    correlation_root,
    hold_body,
    joint_paths,
    joint_uniforms,
    normal_score_correlation,
    rearrange_above,
)
from marketcast.forecast.quantiles import NINE, quantile_function, sample_paths

SCALES = {"close": (0.0, 0.01), "high": (0.03, 0.005), "low": (-0.03, 0.005)}  # (mean, sd) of each bar's return
POSITIVE = np.array([[1.0, 0.6, 0.5], [0.6, 1.0, 0.6], [0.5, 0.6, 1.0]])  # close, high, low
NEGATIVE = np.array([[1.0, 0.5, -0.2], [0.5, 1.0, -0.4], [-0.2, -0.4, 1.0]])


def synthetic_bars(corr: np.ndarray, n: int, seed: int) -> pd.DataFrame:
    """Bars whose close/high/low returns on the previous close are Gaussian with correlation ``corr`` (so their
    copula is Gaussian with that matrix); open = previous close. The highs sit 3 sds of close above it, so
    ``high >= max(open, close)`` is forced (and the copula touched) on about one bar in a thousand."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 3)) @ np.linalg.cholesky(corr).T
    r = {f: m + s * z[:, i] for i, (f, (m, s)) in enumerate(SCALES.items())}
    close = 100.0 * np.cumprod(1.0 + r["close"])
    prev = np.concatenate([[100.0], close[:-1]])
    high = np.maximum(prev * (1.0 + r["high"]), np.maximum(prev, close))
    low = np.minimum(prev * (1.0 + r["low"]), np.minimum(prev, close))
    index = pd.date_range("2000-01-03", periods=n, freq="D", tz="UTC", name="timestamp")
    return pd.DataFrame({"open": prev, "high": high, "low": low, "close": close, "volume": 1.0}, index=index)


def true_knots(batch: ContextBatch, horizon: int) -> np.ndarray:
    """``[B, 3, 9, H]`` the synthetic bars' own marginal quantiles for the next bar(s) from the last close."""
    z = norm.ppf(NINE)
    rets = np.array([m + s * z for m, s in SCALES.values()])  # [3, 9]
    knots = batch.last_close()[:, None, None] * (1.0 + rets[None])
    return np.repeat(knots[..., None], horizon, axis=-1)


@pytest.mark.parametrize("corr", [POSITIVE, NEGATIVE], ids=["rho_hl=+0.6", "rho_hl=-0.4"])
def test_paths_give_back_the_series_rank_correlation_and_its_marginals(corr):
    frame = synthetic_bars(corr, 3001, seed=7)
    batch = make_batch(frame, [3000], 3000, 1)
    fitted, ok = normal_score_correlation(batch)
    assert ok.all() and np.abs(fitted[0] - corr).max() < 0.05  # 2,999 residuals: sd of the estimate ~0.015
    knots = true_knots(batch, 1)
    paths, meta = joint_paths(knots, NINE, batch, seed=3, num_samples=20_000)
    assert meta["path_kind"] == "copula" and meta["copula_fallback"] == 0.0
    assert meta["range_bound"] < 0.01  # the marginals respect the body almost always
    high, low = paths[0, 1, :, 0], paths[0, 2, :, 0]
    truth = 6.0 / math.pi * math.asin(corr[1, 2] / 2.0)  # Spearman's rho of a Gaussian copula (Kruskal 1958)
    assert abs(spearmanr(high, low)[0] - truth) < 0.05
    # each field's marginal is the model's: the share of paths below each knot is its level
    below = (paths[0, :, :, 0][:, :, None] <= knots[0, :, None, :, 0]).mean(axis=1)  # [3, 9]
    assert np.abs(below - np.array(NINE)[None]).max() < 0.015  # binomial sd at 20,000 paths <= 0.0035


def test_the_quantile_function_is_unchanged_only_high_and_low_draws_change_paths():
    frame = synthetic_bars(POSITIVE, 400, seed=1)
    batch = make_batch(frame, [200, 399], 200, 3)
    knots = true_knots(batch, 3)
    corr, _ = normal_score_correlation(batch, excess=True)
    u = joint_uniforms(corr, batch.window_keys(), 5, 64, 3)
    raw = quantile_function(torch.as_tensor(knots), u, NINE).numpy()
    paths, meta = joint_paths(knots, NINE, batch, seed=5, num_samples=64, hold="excursions")
    assert np.array_equal(paths[:, 0], raw[:, 0]) and meta["range_bound"] == 0.0
    # high and low: the model's own draws, each window's and step's handed out across its paths
    assert np.array_equal(np.sort(paths[:, 1:], axis=2), np.sort(raw[:, 1:], axis=2))
    assert (paths[:, 1] >= paths[:, 0]).all() and (paths[:, 2] <= paths[:, 0]).all()
    # a draw at a knot's level is that knot, bit for bit, for every field, window and step
    at_levels = torch.tensor(NINE, dtype=torch.float64)[None, None, :, None].expand(2, 3, 9, 3)
    assert np.array_equal(quantile_function(torch.as_tensor(knots), at_levels, NINE).numpy(), knots)


def test_the_quantile_function_is_unchanged_only_the_uniforms_are_joint():
    frame = synthetic_bars(POSITIVE, 400, seed=1)
    batch = make_batch(frame, [200, 399], 200, 3)
    knots = true_knots(batch, 3)
    corr, _ = normal_score_correlation(batch)
    u = joint_uniforms(corr, batch.window_keys(), 5, 64, 3)
    raw = quantile_function(torch.as_tensor(knots), u, NINE).numpy()
    paths, meta = joint_paths(knots, NINE, batch, seed=5, num_samples=64)
    free = (raw[:, 1] >= raw[:, 0]) & (raw[:, 2] <= raw[:, 0])  # draws the body did not touch
    assert np.array_equal(paths[:, 0], raw[:, 0]) and free.mean() > 0.99
    for f in (1, 2):
        assert np.array_equal(paths[:, f][free], raw[:, f][free])
    assert meta["range_bound"] == pytest.approx(1.0 - free.mean())
    # a draw at a knot's level is that knot, bit for bit, for every field, window and step
    at_levels = torch.tensor(NINE, dtype=torch.float64)[None, None, :, None].expand(2, 3, 9, 3)
    assert np.array_equal(quantile_function(torch.as_tensor(knots), at_levels, NINE).numpy(), knots)


def test_uniforms_are_uniform_with_the_fitted_rank_correlation():
    corr = np.array([[[1.0, 0.8, 0.7], [0.8, 1.0, 0.5], [0.7, 0.5, 1.0]]])
    u = joint_uniforms(corr, np.array([17], dtype=np.uint64), 0, 40_000, 1)[0, :, :, 0].numpy()  # [3, S]
    for f in range(3):  # each field uniform on (0, 1)
        assert np.abs(np.quantile(u[f], [0.1, 0.5, 0.9]) - [0.1, 0.5, 0.9]).max() < 0.01
    rho = spearmanr(u.T)[0]
    truth = 6.0 / np.pi * np.arcsin(corr[0] / 2.0)
    assert np.abs(rho - truth).max() < 0.02


def test_correlation_root_handles_singular_and_improper_matrices():
    ones = np.ones((1, 3, 3))  # comonotone: rank 1
    improper = np.array([[[1.0, 0.9, 0.9], [0.9, 1.0, -0.9], [0.9, -0.9, 1.0]]])  # eigenvalue < 0
    for corr in (ones, improper):
        root = correlation_root(corr)
        assert np.allclose(np.linalg.norm(root, axis=2), 1.0)  # unit variance per field: marginals kept
        assert np.linalg.eigvalsh(root @ root.transpose(0, 2, 1)).min() > -1e-12
    assert np.allclose(correlation_root(ones) @ correlation_root(ones).transpose(0, 2, 1), 1.0)


def test_short_or_flat_contexts_fall_back_to_one_shared_uniform():
    frame = synthetic_bars(POSITIVE, 60, seed=2)
    short = make_batch(frame, [MIN_BARS - 1], MIN_BARS)  # MIN_BARS - 1 residuals
    enough = make_batch(frame, [MIN_BARS], MIN_BARS + 1)
    assert not normal_score_correlation(short)[1][0] and normal_score_correlation(enough)[1][0]
    flat = frame.copy()
    flat[["open", "high", "low", "close"]] = 50.0
    corr, ok = normal_score_correlation(make_batch(flat, [59], 50))
    assert not ok[0] and np.array_equal(corr[0], np.ones((3, 3)))
    # the fallback is the comonotone scheme: the three fields of a path share one rank
    batch = make_batch(frame, [MIN_BARS - 1], MIN_BARS, 2)
    knots = true_knots(batch, 2)
    paths, meta = joint_paths(knots, NINE, batch, seed=1, num_samples=500)
    assert meta["copula_fallback"] == 1.0
    ranks = np.argsort(np.argsort(paths[0, :, :, 0], axis=1), axis=1)
    assert np.array_equal(ranks[0], ranks[1]) and np.array_equal(ranks[0], ranks[2])


def test_rearrange_above_hand_computed():
    # floors 3, 1, 2, 0 for values 1, 4, 2, 5: path 0 (floor 3) takes 4, the nearest free value >= 3 to its 1;
    # path 2 (floor 2) keeps its 2; path 1 (floor 1) takes the nearest free value to its lost 4 that meets 1: 5;
    # path 3 (floor 0) gets the 1 left
    out = rearrange_above(np.array([[1.0, 4.0, 2.0, 5.0]]), np.array([[3.0, 1.0, 2.0, 0.0]]))
    assert out.tolist() == [[4.0, 5.0, 2.0, 1.0]]
    untouched = np.array([[1.0, 4.0, 2.0, 5.0]])
    assert np.array_equal(rearrange_above(untouched, untouched - 1.0), untouched)
    # infeasible: no value meets path 0's floor 9; it takes the largest, 4; path 1 (floor 3) then gets the
    # nearest free value to its 4, 2, below its floor (the caller replaces both); path 2 gets 1
    out = rearrange_above(np.array([[1.0, 4.0, 2.0]]), np.array([[9.0, 3.0, 1.0]]))
    assert out.tolist() == [[4.0, 2.0, 1.0]]


@given(st.integers(2, 12), st.integers(0, 10_000))
@settings(max_examples=200, deadline=None)
def test_rearrange_above_meets_every_floor_a_permutation_can_meet(s, seed):
    rng = np.random.default_rng(seed)
    floors = rng.normal(size=(3, s))
    values = floors[:, rng.permutation(s)] + rng.exponential(size=(3, s)) * rng.integers(0, 2, size=(3, s))
    values = np.where(rng.random((3, 1)) < 0.3, rng.normal(size=(3, s)), values)  # some rows infeasible
    out = rearrange_above(values, floors)
    assert np.array_equal(np.sort(out, axis=1), np.sort(values, axis=1))  # a permutation of each row
    feasible = (np.sort(values, axis=1) >= np.sort(floors, axis=1)).all(axis=1)  # sorted dominance
    assert (out[feasible] >= floors[feasible]).all()


def test_hold_body_hand_computed():
    # one window, two paths, two steps: (close, high, low)
    paths = np.array([[[[10.0, 11.0], [9.0, 12.0]],      # close
                       [[9.5, 12.0], [9.5, 12.5]],       # high
                       [[9.0, 11.5], [9.6, 11.0]]]])     # low
    held, share = hold_body(paths)
    assert held[0, 1].tolist() == [[10.0, 12.0], [9.5, 12.5]]  # high 9.5 < close 10 raised to 10
    assert held[0, 2].tolist() == [[9.0, 11.0], [9.0, 11.0]]   # low 11.5 > 11 and 9.6 > 9 lowered
    assert share == pytest.approx(3 / 4)
    opens = np.array([[[10.5, 11.0], [9.0, 12.0]]])
    held, share = hold_body(paths, opens)
    assert held[0, 1, 0, 0] == 10.5 and held[0, 1, 1, 1] == 12.5 and share == pytest.approx(3 / 4)


@pytest.mark.parametrize("hold", ["clip", "excursions"])
def test_every_path_is_a_bar_even_when_the_marginals_disagree(hold):
    frame = synthetic_bars(NEGATIVE, 300, seed=4)
    batch = make_batch(frame, [150, 299], 150, 4)
    knots = true_knots(batch, 4)
    knots[:, 1] -= 0.04 * batch.last_close()[:, None, None]  # highs mostly below the close: incoherent
    paths, meta = joint_paths(knots, NINE, batch, seed=9, num_samples=256, hold=hold)
    assert (paths[:, 1] >= paths[:, 0]).all() and (paths[:, 2] <= paths[:, 0]).all()
    assert 0.5 < meta["range_bound"] < 1.0  # most highs: clipped, or (no permutation holds them) replaced


def test_excursions_hold_the_knots_without_atoms_on_the_embedded_data(embedded_bars):
    """Issue 54's copula check, for ``hold="excursions"``: with the context's own quantiles as knots, every 10th
    daily window, the share of path bars with high == close (low == close) is <= 2 % and every knot of high and
    low keeps its level within 0.03 (the paths' CDF at the knot, pooled over windows). The default ``clip`` misses
    both (16 % and 12-13 % atoms, up to 0.036): asserted too, so the docstring's trade-off stays true."""
    for bars in embedded_bars:
        frame = bars.frame
        batch = make_batch(frame, np.arange(300, len(frame) - 1, 10), 256, 1)
        knots = historical_knots(batch)
        for hold in ("excursions", "clip"):
            paths = joint_paths(knots, NINE, batch, 0, 256, hold=hold)[0][..., 0]  # [B, 3, S]
            atoms = max((paths[:, 1] == paths[:, 0]).mean(), (paths[:, 2] == paths[:, 0]).mean())
            cdf = (paths[:, 1:, :, None] <= knots[:, 1:, None, :, 0]).mean(axis=2).mean(axis=0)  # [2, 9]
            error = np.abs(cdf - np.array(NINE)[None]).max()
            if hold == "excursions":
                assert atoms <= 0.02 and error <= 0.03, (atoms, error)
            else:
                assert atoms > 0.1 and error > 0.03


def test_paths_are_keyed_on_the_window_and_the_seed():
    frame = synthetic_bars(POSITIVE, 400, seed=5)
    batch = make_batch(frame, [250, 300, 399], 200, 2)
    knots = true_knots(batch, 2)
    paths, _ = joint_paths(knots, NINE, batch, seed=4, num_samples=32)
    alone, _ = joint_paths(knots[1:2], NINE, make_batch(frame, [300], 200, 2), seed=4, num_samples=32)
    assert np.array_equal(alone[0], paths[1])
    assert np.array_equal(joint_paths(knots, NINE, batch, seed=4, num_samples=32)[0], paths)
    assert not np.allclose(joint_paths(knots, NINE, batch, seed=5, num_samples=32)[0], paths)


def test_the_copula_reads_the_context_only():
    frame = synthetic_bars(POSITIVE, 400, seed=6)
    batch = make_batch(frame, [300], 200, 1)
    later = frame.copy()
    later.iloc[301:, :4] *= 1.5  # every bar after the decision bar changes
    assert np.array_equal(normal_score_correlation(make_batch(later, [300], 200, 1))[0],
                          normal_score_correlation(batch)[0])


def test_toto2_forecasts_joint_paths_from_its_quantiles():
    from marketcast.forecast.toto2 import Toto2Config, Toto2Forecaster

    frame = synthetic_bars(POSITIVE, 300, seed=8)
    batch = make_batch(frame, [200, 299], 128, 2)
    toto = Toto2Forecaster.from_config(Toto2Config.size("4m"), seed=1)
    fc = toto.forecast(batch, 2, 64, seed=2)
    assert toto.paths == "copula" and fc.meta["path_kind"] == "copula"
    assert np.array_equal(fc.samples, joint_paths(fc.quantiles, NINE, batch, 2, 64)[0])
    assert (fc.samples[:, 1] >= fc.samples[:, 0]).all() and (fc.samples[:, 2] <= fc.samples[:, 0]).all()


def both_limits_inside(high: np.ndarray, low: np.ndarray, limit_high: np.ndarray, limit_low: np.ndarray) -> float:
    """Share of (window, path) first bars whose range holds both MaxDiff limits: the buy at the forecast low and
    the take profit at the forecast high (zero offsets, the default median point forecast)."""
    return float(((high >= limit_high[:, None]) & (low <= limit_low[:, None])).mean())


def historical_knots(batch: ContextBatch) -> np.ndarray:
    """``[B, 3, 9, 1]`` a weight-free quantile model with calibrated marginals: each field's knots are the
    context's own quantiles of that field's return on the previous close, applied to the last close."""
    values, mask = batch.values, batch.mask
    prev = values[:, :-1, 3]
    rets = [np.where(mask[:, 1:], values[:, 1:, i] / prev - 1.0, np.nan) for i in (3, 1, 2)]  # close, high, low
    q = np.stack([np.nanquantile(r, NINE, axis=1).T for r in rets], axis=1)  # [B, 3, 9]
    return (batch.last_close()[:, None, None] * (1.0 + q))[..., None]


def test_embedded_data_both_maxdiff_limits_fill_as_often_as_in_the_real_bars(embedded_bars):
    """Every 10th daily window of SP500 and NASDAQ. The share of path bars holding both MaxDiff limits (at the
    median knots) is a property of the copula; the real next bars give the truth at the calibrated historical
    model's limits. With the copula both the historical model and Toto 2.0 (random 4m weights) match it within
    a factor 1.25; with one shared uniform the share is 0. Toto 1.0's paths (tiny config, random weights) hold
    both limits a quarter of the time, the share of independent fields: its mixture draws each variate with its
    own uniforms, so at one step its close, high and low are independent. Issue 44's yardstick, a quantile
    model's share within a factor of 2 of Toto 1.0's on the same windows, holds for the calibrated quantile
    model (0.2505 / 0.130 = 1.93). It cannot hold for every model that matches the bars, because the bars
    themselves sit 0.2505 / 0.1195 = 2.10 from independence: Toto 2.0 with random weights reads 2.04 pooled
    (1.97 SP500, 2.11 NASDAQ), lower than the calibrated model because its incoherent random marginals move a
    path's high or low to the close in 3-4 % of draws. The bars are the yardstick asserted for every model."""
    from marketcast.forecast.toto import TotoConfig, TotoForecaster
    from marketcast.forecast.toto.model import TotoModel, init_weights
    from marketcast.forecast.toto2 import Toto2Config, Toto2Forecaster

    warnings.filterwarnings("ignore", category=ImportWarning)
    toto2 = Toto2Forecaster.from_config(Toto2Config.size("4m"), seed=1)
    toto1 = TotoForecaster(init_weights(TotoModel(TotoConfig.tiny()), seed=3), compile="eager")
    shares: dict[str, list[float]] = {"real": [], "historical": [], "toto2": [], "comonotone": [], "toto1": []}
    for bars in embedded_bars:
        frame = bars.frame
        ends = np.arange(300, len(frame) - 1, 10)
        batch = make_batch(frame, ends, 256, 1)

        def add(name: str, paths: np.ndarray, median: np.ndarray) -> None:  # median [B, 3] of close/high/low
            shares[name].append(both_limits_inside(paths[:, 1, :, 0], paths[:, 2, :, 0], median[:, 1], median[:, 2]))

        hist = historical_knots(batch)
        nxt = frame.iloc[ends + 1]
        add("real", nxt[["close", "high", "low"]].to_numpy()[:, :, None, None], hist[:, :, 4, 0])
        add("historical", joint_paths(hist, NINE, batch, 0, 256)[0], hist[:, :, 4, 0])
        fc = toto2.forecast(batch, 1, 256, seed=0)
        add("toto2", fc.samples, fc.quantiles[:, :, 4, 0])
        add("comonotone", sample_paths(fc.quantiles, NINE, batch.window_keys(), 0, 256), fc.quantiles[:, :, 4, 0])
        s1 = toto1.forecast(batch, 1, 256, seed=0).samples
        add("toto1", s1, np.median(s1[..., 0], axis=2))
    share = {k: float(np.mean(v)) for k, v in shares.items()}
    print("both MaxDiff limits inside the bar's range:", {k: round(v, 4) for k, v in share.items()})
    assert 0.8 < share["historical"] / share["real"] < 1.25
    assert 0.8 < share["toto2"] / share["real"] < 1.25
    assert share["comonotone"] < 0.01
    assert abs(share["toto1"] - 0.25) < 0.01
    assert share["toto1"] / share["historical"] < 2.0


def test_reports_say_which_models_use_the_copula():
    from marketcast.forecast.baseline import BaselineForecaster
    from marketcast.forecast.paths import paths_note, paths_of, paths_text
    from marketcast.forecast.toto2 import Toto2Forecaster

    assert paths_of(BaselineForecaster()) == "joint" and Toto2Forecaster.paths == "copula"
    assert paths_of(object()) == "joint"  # a forecaster that does not say draws jointly
    assert paths_text({"model": "toto"}) == ""  # joint samples: the reports stay as they were
    assert paths_text({"path_kind": "copula", "range_bound": 0.0312}) == (
        "Paths: the model's marginal quantiles joined by a Gaussian copula of each context's close/high/low "
        "(not joint samples of the model; high or low moved to the close in 3.1% of draws).")
    rows = [{"model": "baseline", "paths": "joint"}, {"model": "toto2", "paths": "copula"},
            {"model": "chronos2", "paths": "copula"}, {"model": "old"}]
    assert paths_note(rows) == ("Paths: toto2, chronos2 predict quantiles, joined into paths by a Gaussian copula "
                                "of each context (their MaxDiff and take-profit fills read that copula); joint "
                                "samples: baseline, old.")
    assert paths_note(rows[:1]) == ""
