"""Position sizing from (calibrated) forecast samples: how much of the allowed capital a trade gets.

Input per window: the forecast's sample returns of the *long* trade, ``[W, S]`` (e.g. exit / entry - 1 per
sample path, from :func:`marketcast.calibrate.recalibrate` output), and the direction the strategy chose,
``[W]`` in {-1, 0, +1}. A short earns the negative of the long return, so the trade's return samples are
``direction * returns``. Output: sizes ``[W]``, 0 where flat.

``fixed``  1.0 of the allowed capital on every trade (the behaviour before sizing existed).
``kelly``  fractional Kelly: ``kelly_fraction`` (default 0.25) times the continuous-time Kelly fraction
           f* = mu / sigma^2 of the trade's return samples (Kelly 1956, "A new interpretation of information
           rate", Bell Syst. Tech. J. 35:917-926; Thorp 2006, "The Kelly criterion in blackjack, sports betting
           and the stock market", Handbook of Asset and Liability Management: f* = (m - r) / s^2, with r = 0),
           clipped to [0, ``kelly_cap``] of capital (default 1: never more than the allowed capital). A
           fraction of f* keeps most of the growth at a fraction of the variance and limits the damage of an
           overstated mu (MacLean, Thorp & Ziemba 2010, "Long-term capital growth: the good and bad properties
           of the Kelly and fractional Kelly capital growth criteria", Quant. Finance 10:681-687: c f* earns
           c(2 - c) of the optimal growth rate at c^2 of its variance; c = 0.25: 44 % of it at 6 %). A daily
           f* is large (a 1.4 % sigma makes mu = 0.08 % an f* of 4): the whole f* clipped at 0.25, the rule
           before, was an on/off switch (every order of the embedded daily files at 0 or at the cap, most at
           the cap); 0.25 f* under a cap of 1 moves with mu and sigma.
``cvar``   the size at which the trade's expected shortfall at ``es_level`` (95 %) loses ``risk_per_trade`` of
           equity: size = risk_per_trade / ES, capped at 1.0 (1.0 when the tail does not lose). ES is the
           Rockafellar & Uryasev 2000 form ("Optimization of conditional value-at-risk", J. Risk 2:21-41),
           ES = VaR + E[(L - VaR)+] / (1 - alpha) at the empirical alpha-quantile VaR of the loss L = -return,
           exact for the samples' discrete distribution (no rounding of the tail count).

Sizes follow the spread: a forecast twice as wide with the same mean gets a quarter of the Kelly size (below
the cap) and about half the CVaR size (exactly half when the mean is 0).

The trade's return samples (:func:`trade_return_samples`, what the engine and the live planner size on):
the horizon-1 decision at bar t enters at its entry limit, or for a market order at close_t (the forecast's
anchor and the best estimate of bar t+1's open, as the planner's expected edge); along each sample path s it
exits at the take-profit if that path's high (long) or low (short) reaches it, else at that path's close.
Sample path s of every field is the same draw (recalibration keeps ranks), so ``long return_s = exit_s /
entry - 1``, conditional on the entry filling: a limit that does not fill trades nothing whatever its size, so
only the paths that reach it (long: the path's low <= the limit; short: its high >= it) are the trade's
distribution (:func:`trade_fills`); a limit no path reaches gets size 0. Counting the other paths as if they had
filled at the limit is adverse selection the fill never grants: ``highlow``'s long at the forecast low then
earns close / limit - 1 on the paths that never come down to it too (embedded daily files: mu / sigma about
0.4, f* 15-115, every order at the cap); on the paths that do reach the limit the close is on average below it,
and the size is 0 on nearly every order.
Costs are not in mu; they scale with the size in the fills (size x (gross - fees)). Netting the round trip
(f* = (mu - c) / sigma^2, the growth-optimal size of the net return) would size almost every daily order of
a forecaster whose edge is below its 14 bp stock round trip at 0 (the baseline on the embedded files: 86-96 %),
and which of the rest clear c is then decided by the samples' Monte Carlo noise in mu (sigma / sqrt(S)), not by
the forecast; the strategy's rule and the live gates' ``min_edge`` decide whether an edge pays its costs.
"""

from __future__ import annotations

import numpy as np

from marketcast.errors import ConfigError

POLICIES = ("fixed", "kelly", "cvar")


def _check(policy: str, kelly_cap: float, risk_per_trade: float, es_level: float,
           kelly_fraction: float = 0.25) -> None:
    if policy not in POLICIES:
        raise ConfigError(f"sizing: unknown policy {policy!r}; use one of {', '.join(POLICIES)}")
    for name, value in (("kelly_cap", kelly_cap), ("risk_per_trade", risk_per_trade), ("es_level", es_level),
                        ("kelly_fraction", kelly_fraction)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ConfigError(f"sizing: {name}={value!r} is not a number; pass a fraction such as 0.25")
    if not 0.0 < kelly_cap <= 1.0:
        raise ConfigError(f"sizing: kelly_cap={kelly_cap!r} is outside (0, 1]; pass e.g. 1 (all of the capital)")
    if not 0.0 < kelly_fraction <= 1.0:
        raise ConfigError(f"sizing: kelly_fraction={kelly_fraction!r} is outside (0, 1]; pass e.g. 0.25 "
                          "(quarter Kelly)")
    if not 0.0 < risk_per_trade <= 1.0:
        raise ConfigError(f"sizing: risk_per_trade={risk_per_trade!r} is outside (0, 1]; "
                          "pass the equity fraction a trade's 95 % tail may lose, e.g. 0.01")
    if not 0.0 < es_level < 1.0:
        raise ConfigError(f"sizing: es_level={es_level!r} is outside (0, 1); pass e.g. 0.95")


def _filled(trade_returns: np.ndarray, filled: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """``filled`` [W, S] (all True when None) and the number of filled paths of each row [W]."""
    m = np.ones(trade_returns.shape, dtype=bool) if filled is None else np.asarray(filled, dtype=bool)
    return m, m.sum(axis=-1)


def kelly_size(trade_returns: np.ndarray, fraction: float = 0.25, cap: float = 1.0,
               filled: np.ndarray | None = None) -> np.ndarray:
    """``fraction`` x mean / variance (ddof=0) of each row of ``trade_returns`` [W, S] over its ``filled`` paths
    (default all), clipped to [0, cap]; a row with no variance gets ``cap`` when its mean is positive, else 0;
    a row with no filled path 0. Sums run along each row, so a row alone and in a batch give the same size."""
    m, n = _filled(trade_returns, filled)
    count = np.maximum(n, 1)
    mu = np.where(m, trade_returns, 0.0).sum(axis=-1) / count
    dev = trade_returns - mu[:, None]
    var = np.where(m, dev * dev, 0.0).sum(axis=-1) / count
    raw = np.divide(mu, var, out=np.where(mu > 0, np.inf, 0.0), where=var > 0)
    return np.where(n > 0, np.clip(fraction * raw, 0.0, cap), 0.0)


def expected_shortfall(trade_returns: np.ndarray, level: float = 0.95, filled: np.ndarray | None = None
                       ) -> np.ndarray:
    """Expected shortfall (CVaR) at ``level`` of the loss -return of each row of [W, S] over its ``filled``
    paths (default all), as a positive loss (negative when even the tail gains; NaN for a row with no filled
    path). Rockafellar & Uryasev 2000, at the empirical VaR: numpy's ``inverted_cdf`` quantile of the filled
    losses (the smallest loss whose empirical CDF reaches ``level``), taken from each row's sorted losses."""
    m, n = _filled(trade_returns, filled)
    loss = -trade_returns
    index = n * level - 1.0  # numpy's inverted_cdf: this order statistic if whole, else the next one up
    below = np.floor(index)
    k = np.clip(np.where(index == below, below, below + 1.0), 0, np.maximum(n - 1, 0)).astype(np.int64)
    ranked = np.sort(np.where(m, loss, np.inf), axis=-1)  # unfilled paths sort last
    var = np.take_along_axis(ranked, k[:, None], axis=-1)
    tail = np.where(m, np.maximum(loss - var, 0.0), 0.0).sum(axis=-1, keepdims=True) / np.maximum(n, 1)[:, None]
    return np.where(n > 0, (var + tail / (1.0 - level))[..., 0], np.nan)


def position_sizes(returns, direction, policy: str = "fixed", *, kelly_cap: float = 1.0,
                   risk_per_trade: float = 0.01, es_level: float = 0.95, kelly_fraction: float = 0.25,
                   filled=None) -> np.ndarray:
    """Sizes ``[W]`` in [0, cap] (cap: 1.0 for fixed and cvar, ``kelly_cap`` for kelly) from the long trade's
    sample returns ``[W, S]`` and ``direction`` ``[W]`` (+1 long, -1 short, 0 flat: size 0), over the paths
    ``filled`` ``[W, S]`` (default all; kelly and cvar give 0 where none is)."""
    _check(policy, kelly_cap, risk_per_trade, es_level, kelly_fraction)
    r = np.asarray(returns, dtype=np.float64)
    d = np.asarray(direction)
    if r.ndim != 2 or r.shape[1] == 0 or d.shape != (r.shape[0],):
        raise ConfigError(f"sizing: returns {np.shape(returns)} and direction {np.shape(direction)} do not fit; "
                          "pass returns [W, S] (S >= 1) and one direction per window [W]")
    if not np.isin(d, (-1, 0, 1)).all():
        raise ConfigError("sizing: direction holds values other than -1, 0, +1; pass -1 short, 0 flat, +1 long")
    if not np.isfinite(r).all():
        raise ConfigError("sizing: sample returns hold NaN or inf; repair or drop those windows first")
    if filled is not None and np.shape(filled) != r.shape:
        raise ConfigError(f"sizing: filled {np.shape(filled)} does not fit returns {r.shape}; pass one flag per "
                          "window and sample path")
    trade = d[:, None] * r
    if policy == "fixed":
        size = np.ones(r.shape[0])
    elif policy == "kelly":
        size = kelly_size(trade, kelly_fraction, kelly_cap, filled)
    else:
        es = expected_shortfall(trade, es_level, filled)
        size = np.minimum(np.divide(risk_per_trade, es, out=np.ones_like(es), where=es > 0), 1.0)
        size = np.where(np.isnan(es), 0.0, size)  # no path fills
    return np.where(d != 0, size, 0.0)


def trade_return_samples(side, entry_limit, take_profit, close, close_ret, high_ret, low_ret) -> np.ndarray:
    """The long trade's return per sample path ``[W, S]`` of orders ``[W]`` (``entry_limit`` / ``take_profit``
    NaN: none) decided at close_t = ``close`` ``[W]``, from the horizon-1 sample returns ``[W, S]`` of
    close, high and low relative to close_t (module docstring)."""
    side, limit, tp, close = (np.asarray(a, dtype=np.float64) for a in (side, entry_limit, take_profit, close))
    entry = np.where(np.isnan(limit), close, limit)[:, None]
    price = close[:, None]
    tp = tp[:, None]
    with np.errstate(invalid="ignore"):  # NaN take profits compare False
        hit = np.where(side[:, None] > 0, price * (1.0 + high_ret) >= tp, price * (1.0 + low_ret) <= tp)
    exit_ = np.where(hit, tp, price * (1.0 + close_ret))
    return exit_ / entry - 1.0


def trade_fills(side, entry_limit, close, high_ret, low_ret) -> np.ndarray:
    """Which sample paths ``[W, S]`` fill the entry of orders ``[W]`` decided at close_t = ``close``: every path
    for a market order (``entry_limit`` NaN); for a long limit the paths whose low reaches it, for a short one
    those whose high does (the touch rule of :func:`marketcast.backtest.fills.settle_all`)."""
    side, limit, close = (np.asarray(a, dtype=np.float64) for a in (side, entry_limit, close))
    price, limit = close[:, None], limit[:, None]
    with np.errstate(invalid="ignore"):  # NaN limits compare False
        reached = np.where(side[:, None] > 0, price * (1.0 + low_ret) <= limit, price * (1.0 + high_ret) >= limit)
    return np.isnan(limit) | reached


def order_sizes(side, entry_limit, take_profit, close, samples: dict, policy: str = "fixed", *,
                kelly_cap: float = 1.0, risk_per_trade: float = 0.01, kelly_fraction: float = 0.25) -> np.ndarray:
    """Sizes ``[W]`` of orders ``[W]`` from ``samples`` (``{"close"|"high"|"low": [W, S]}`` horizon-1 sample
    returns relative to ``close``): :func:`position_sizes` of :func:`trade_return_samples` over the paths that
    fill (:func:`trade_fills`); ``fixed`` is 1.0 for every window (flat ones too: they trade nothing either
    way). One window (the live planner) and many (the engine) give the same sizes bit for bit: every reduction
    runs along each row's samples."""
    side = np.asarray(side)
    if policy == "fixed":
        _check(policy, kelly_cap, risk_per_trade, 0.95, kelly_fraction)
        return np.ones(len(side))
    returns = trade_return_samples(side, entry_limit, take_profit, close, samples["close"], samples["high"],
                                   samples["low"])
    filled = trade_fills(side, entry_limit, close, samples["high"], samples["low"])
    return position_sizes(returns, side.astype(np.int64), policy, kelly_cap=kelly_cap,
                          risk_per_trade=risk_per_trade, kelly_fraction=kelly_fraction, filled=filled)
