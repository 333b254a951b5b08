"""Position sizing from (calibrated) forecast samples: how much of the allowed capital a trade gets.

Input per window: the forecast's sample returns of the *long* trade, ``[W, S]`` (e.g. exit / entry - 1 per
sample path, from :func:`marketcast.calibrate.recalibrate` output), and the direction the strategy chose,
``[W]`` in {-1, 0, +1}. A short earns the negative of the long return, so the trade's return samples are
``direction * returns``. Output: sizes ``[W]``, 0 where flat.

``fixed``  1.0 of the allowed capital on every trade (the behaviour before sizing existed).
``kelly``  the continuous-time Kelly fraction f* = mu / sigma^2 of the trade's return samples (Kelly 1956,
           "A new interpretation of information rate", Bell Syst. Tech. J. 35:917-926; Thorp 2006, "The Kelly
           criterion in blackjack, sports betting and the stock market", Handbook of Asset and Liability
           Management: the continuous approximation f* = (m - r) / s^2, with r = 0), clipped to
           [0, ``kelly_cap``] of capital (default 0.25): like fractional Kelly, the cap limits the damage of
           an overstated mu.
``cvar``   the size at which the trade's expected shortfall at ``es_level`` (95 %) loses ``risk_per_trade`` of
           equity: size = risk_per_trade / ES, capped at 1.0 (1.0 when the tail does not lose). ES is the
           Rockafellar & Uryasev 2000 form ("Optimization of conditional value-at-risk", J. Risk 2:21-41),
           ES = VaR + E[(L - VaR)+] / (1 - alpha) at the empirical alpha-quantile VaR of the loss L = -return,
           exact for the samples' discrete distribution (no rounding of the tail count).

Sizes follow the spread: a forecast twice as wide with the same mean gets a quarter of the Kelly size and
about half the CVaR size (exactly half when the mean is 0).

The trade's return samples (:func:`trade_return_samples`, what the engine and the live planner size on):
the horizon-1 decision at bar t enters at its entry limit, or for a market order at close_t (the forecast's
anchor and the best estimate of bar t+1's open, as the planner's expected edge); along each sample path s it
exits at the take-profit if that path's high (long) or low (short) reaches it, else at that path's close.
Sample path s of every field is the same draw (recalibration keeps ranks), so ``long return_s = exit_s /
entry - 1``, conditional on the entry filling: a limit that does not fill trades nothing whatever its size.
Costs are not in the samples; they scale with the size in the fills (size x (gross - fees)).
"""

from __future__ import annotations

import numpy as np

from marketcast.errors import ConfigError

POLICIES = ("fixed", "kelly", "cvar")


def _check(policy: str, kelly_cap: float, risk_per_trade: float, es_level: float) -> None:
    if policy not in POLICIES:
        raise ConfigError(f"sizing: unknown policy {policy!r}; use one of {', '.join(POLICIES)}")
    for name, value in (("kelly_cap", kelly_cap), ("risk_per_trade", risk_per_trade), ("es_level", es_level)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ConfigError(f"sizing: {name}={value!r} is not a number; pass a fraction such as 0.25")
    if not 0.0 < kelly_cap <= 1.0:
        raise ConfigError(f"sizing: kelly_cap={kelly_cap!r} is outside (0, 1]; pass e.g. 0.25 (quarter Kelly)")
    if not 0.0 < risk_per_trade <= 1.0:
        raise ConfigError(f"sizing: risk_per_trade={risk_per_trade!r} is outside (0, 1]; "
                          "pass the equity fraction a trade's 95 % tail may lose, e.g. 0.01")
    if not 0.0 < es_level < 1.0:
        raise ConfigError(f"sizing: es_level={es_level!r} is outside (0, 1); pass e.g. 0.95")


def kelly_fraction(trade_returns: np.ndarray, cap: float = 0.25) -> np.ndarray:
    """f* = mean / variance (ddof=0) of each row of ``trade_returns`` [W, S], clipped to [0, cap]; a row with
    no variance gets ``cap`` when its mean is positive, else 0."""
    mu = trade_returns.mean(axis=-1)
    var = trade_returns.var(axis=-1)
    raw = np.divide(mu, var, out=np.where(mu > 0, np.inf, 0.0), where=var > 0)
    return np.clip(raw, 0.0, cap)


def expected_shortfall(trade_returns: np.ndarray, level: float = 0.95) -> np.ndarray:
    """Expected shortfall (CVaR) at ``level`` of the loss -return of each row of [W, S], as a positive loss
    (negative when even the tail gains). Rockafellar & Uryasev 2000, at the empirical VaR."""
    loss = -trade_returns
    var = np.quantile(loss, level, axis=-1, method="inverted_cdf", keepdims=True)
    return (var + np.maximum(loss - var, 0.0).mean(axis=-1, keepdims=True) / (1.0 - level))[..., 0]


def position_sizes(returns, direction, policy: str = "fixed", *, kelly_cap: float = 0.25,
                   risk_per_trade: float = 0.01, es_level: float = 0.95) -> np.ndarray:
    """Sizes ``[W]`` in [0, cap] (cap: 1.0 for fixed and cvar, ``kelly_cap`` for kelly) from the long trade's
    sample returns ``[W, S]`` and ``direction`` ``[W]`` (+1 long, -1 short, 0 flat: size 0)."""
    _check(policy, kelly_cap, risk_per_trade, es_level)
    r = np.asarray(returns, dtype=np.float64)
    d = np.asarray(direction)
    if r.ndim != 2 or r.shape[1] == 0 or d.shape != (r.shape[0],):
        raise ConfigError(f"sizing: returns {np.shape(returns)} and direction {np.shape(direction)} do not fit; "
                          "pass returns [W, S] (S >= 1) and one direction per window [W]")
    if not np.isin(d, (-1, 0, 1)).all():
        raise ConfigError("sizing: direction holds values other than -1, 0, +1; pass -1 short, 0 flat, +1 long")
    if not np.isfinite(r).all():
        raise ConfigError("sizing: sample returns hold NaN or inf; repair or drop those windows first")
    trade = d[:, None] * r
    if policy == "fixed":
        size = np.ones(r.shape[0])
    elif policy == "kelly":
        size = kelly_fraction(trade, kelly_cap)
    else:
        es = expected_shortfall(trade, es_level)
        size = np.minimum(np.divide(risk_per_trade, es, out=np.ones_like(es), where=es > 0), 1.0)
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


def order_sizes(side, entry_limit, take_profit, close, samples: dict, policy: str = "fixed", *,
                kelly_cap: float = 0.25, risk_per_trade: float = 0.01) -> np.ndarray:
    """Sizes ``[W]`` of orders ``[W]`` from ``samples`` (``{"close"|"high"|"low": [W, S]}`` horizon-1 sample
    returns relative to ``close``): :func:`position_sizes` of :func:`trade_return_samples`; ``fixed`` is 1.0
    for every window (flat ones too: they trade nothing either way). One window (the live planner) and many
    (the engine) give the same sizes bit for bit: every reduction runs along each row's samples."""
    side = np.asarray(side)
    if policy == "fixed":
        _check(policy, kelly_cap, risk_per_trade, 0.95)
        return np.ones(len(side))
    returns = trade_return_samples(side, entry_limit, take_profit, close, samples["close"], samples["high"],
                                   samples["low"])
    return position_sizes(returns, side.astype(np.int64), policy, kelly_cap=kelly_cap,
                          risk_per_trade=risk_per_trade)
