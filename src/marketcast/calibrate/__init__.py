"""Calibration of sample-path forecasts: are the intervals as wide as they claim, and a walk-forward fix.

Sits between the forecasters and the backtest: it reads samples and outcomes (numpy arrays) and never imports
the backtest, runs, trade, sweep or report packages.

* :mod:`marketcast.calibrate.coverage`     empirical coverage of central intervals with Wilson intervals
* :mod:`marketcast.calibrate.pit`          randomised PIT, its histogram, uniformity tests, reliability points
* :mod:`marketcast.calibrate.crps`         ensemble CRPS (the project's one) and its form over a model's quantiles
* :mod:`marketcast.calibrate.recalibrate`  walk-forward conformal / quantile-mapping recalibration
* :mod:`marketcast.calibrate.summary`      the report's calibration block: coverage, PIT and its tests per field

Shapes follow :class:`marketcast.forecast.base.Forecast`: samples ``[..., S, H]`` (sample axis -2) against
outcomes ``[..., H]``; the functions take ``axis`` for other layouts (``axis=-1`` for ``[N, S]`` vs ``[N]``).

Import from the modules: this package imports none of them, so a command loads only what it uses. None of
them imports scipy (a baseline backtest reports CRPS, coverage and PIT without it; tests/spine/test_startup.py).
"""
