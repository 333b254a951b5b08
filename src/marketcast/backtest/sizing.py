"""Position sizing from (calibrated) forecast samples and the forecaster's measured skill: how much of the
allowed capital a trade gets.

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
           **Within an ES budget:** the size is also at most the ``cvar`` size below (``risk_per_trade`` / ES_95 at
           the conditional mean): the growth-optimal size subject to the trade's 95 % expected shortfall losing at
           most ``risk_per_trade`` of equity. The growth c mu - c^2 sigma^2 / 2 is concave in the size c and the ES
           of c x the trade is c x its ES, so the constrained optimum is the smaller of the two sizes (the
           risk-constrained Kelly bet of Busseti, Ryu & Boyd 2016, "Risk-constrained Kelly gambling",
           J. Investing 25(3), arXiv:1603.06183, with the ES constraint of Wesselhöfft & Härdle 2020,
           "Risk-constrained Kelly portfolios under alpha-stable laws", Comput. Econ. 55, for heavy tails).
           mu / sigma^2 reads two
           moments only: a trade with a capped upside (a take-profit, a limit that fills on the way down) and a
           long left tail has a small sigma for its mean, and on a heavy-tailed skewed series (GARCH skew-t,
           benchmarks/sizing_bench.py) 0.25 f* put a third of the orders at the cap, most of ``entry_takeprofit``'s
           and ``highlow``'s; the ES sees the tail those trades keep (2-3 % of the orders at the cap with the
           budget). Where it binds, the size is ``risk_per_trade`` / ES, which falls with the spread as the ES
           grows with it. ``risk_per_trade`` 1 turns it off (a daily trade's ES never reaches 100 %).
``cvar``   the size at which the trade's expected shortfall at ``es_level`` (95 %) loses ``risk_per_trade`` of
           equity: size = risk_per_trade / ES, capped at 1.0 (1.0 when the tail does not lose). ES is the
           Rockafellar & Uryasev 2000 form ("Optimization of conditional value-at-risk", J. Risk 2:21-41),
           ES = VaR + E[(L - VaR)+] / (1 - alpha) at the empirical alpha-quantile VaR of the loss L = -return,
           exact for the samples' discrete distribution (no rounding of the tail count).

**Measured skill.** Kelly and CVaR do not act on the samples' mean ``m`` at face value but on the forecast's
conditional mean as measured walk-forward, ``E[r | m] = b m``: ``b`` is the slope of the regression through the
origin of the realised unit-size trade returns ``r`` (gross, as the fills price them, costs apart as below) on the
forecast trade means ``m`` of the strategy's earlier orders, over every earlier order that filled (sized or not:
an order sized to 0 is still scored as if traded at unit size, so a strategy at size 0 keeps measuring). With
``n`` such orders, ``b = sum(m r) / sum(m^2)``, its standard error ``se = s / sqrt(sum(m^2))`` (``s^2`` the
residual sum of squares over ``n - 1``), and the mean Kelly acts on is ``b* m`` with ``b*`` the slope shrunk
toward 0 by its uncertainty, ``b* = b max(0, 1 - se^2 / b^2)`` for ``b > 0`` (0 for ``b <= 0``: the strategy's
side is never reversed). Its factor ``max(0, 1 - se^2 / b^2)`` estimates ``b^2 / (b^2 + se^2)``, the multiplier that
maximises expected log growth when the edge is known only up to a normal estimation error (Baker & McHale 2013,
"Optimal betting under parameter uncertainty: improving the Kelly criterion", Decision Analysis 10(3):189-199,
their shrinkage of the bet by ``f^2 / (f^2 + var)``), with ``b^2`` estimated without bias by ``b_hat^2 - se^2``:
the positive-part James-Stein factor (James & Stein 1961; Baranchik 1964). A forecaster without skill (``b``
within one standard error of 0: ``|t| <= 1``) sizes 0; the size grows with ``t`` toward ``b`` times the face-value
size, and still falls with the spread (``b* m / sigma^2``). **First windows:** before
:data:`MIN_SKILL_TRADES` (20) earlier orders have filled, there is no estimate and every order is sized 0 (the
backtest records it as decided and unfilled, as a limit that does not fill). Window ``k`` (decided at bar
``t_k``, settled on ``t_k + 1``) reads only orders ``j < k`` (settled on bars ``<= t_k``): the engine's running
sums (:func:`walk_forward_skill`) and the live planner's carried :class:`Skill` add the same pairs in the same
order, so both size an order alike bit for bit. CVaR acts on the samples moved to the same conditional mean
(``trade - m + b* m``), and spends no risk budget on a trade whose conditional mean is not positive.

Sizes follow the spread: a forecast twice as wide with the same mean (and the same measured skill) gets a
quarter of the Kelly size (below the cap and the ES budget) and about half the CVaR size.

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

from dataclasses import dataclass

import numpy as np

from marketcast.errors import ConfigError

POLICIES = ("fixed", "kelly", "cvar")
# Earlier filled orders a strategy needs before its skill is measured (module docstring): fewer size 0.
MIN_SKILL_TRADES = 20


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


def _filled_mean(trade_returns: np.ndarray, m: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The mean of each row over its filled paths ``m`` (0 for a row with none)."""
    return np.where(m, trade_returns, 0.0).sum(axis=-1) / np.maximum(n, 1)


def kelly_size(trade_returns: np.ndarray, fraction: float = 0.25, cap: float = 1.0,
               filled: np.ndarray | None = None, skill=1.0) -> np.ndarray:
    """``fraction`` x ``skill`` x mean / variance (ddof=0) of each row of ``trade_returns`` [W, S] over its
    ``filled`` paths (default all), clipped to [0, cap]; ``skill`` (scalar or [W]) is the measured share of the
    forecast mean that materialises (:func:`skill_factor`; 1.0 takes it at face value). A row with no variance
    gets ``cap`` when its skill-scaled mean is positive, else 0; a row with no filled path 0. Sums run along each
    row, so a row alone and in a batch give the same size."""
    m, n = _filled(trade_returns, filled)
    mu = _filled_mean(trade_returns, m, n)
    dev = trade_returns - mu[:, None]
    var = np.where(m, dev * dev, 0.0).sum(axis=-1) / np.maximum(n, 1)
    mu = np.asarray(skill, dtype=np.float64) * mu
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
                   filled=None, skill=1.0) -> np.ndarray:
    """Sizes ``[W]`` in [0, cap] (cap: 1.0 for fixed and cvar, ``kelly_cap`` for kelly, whose size is also at most
    the cvar size: the ES budget, module docstring) from the long trade's
    sample returns ``[W, S]`` and ``direction`` ``[W]`` (+1 long, -1 short, 0 flat: size 0), over the paths
    ``filled`` ``[W, S]`` (default all; kelly and cvar give 0 where none is). ``skill`` (scalar or ``[W]``) scales
    the samples' mean to the conditional mean kelly and cvar act on (module docstring; 1.0: face value)."""
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
    elif policy == "kelly":  # the growth optimum within the ES budget (module docstring)
        size = np.minimum(kelly_size(trade, kelly_fraction, kelly_cap, filled, skill),
                          cvar_size(trade, risk_per_trade, es_level, filled, skill))
    else:
        size = cvar_size(trade, risk_per_trade, es_level, filled, skill)
    return np.where(d != 0, size, 0.0)


def cvar_size(trade_returns: np.ndarray, risk_per_trade: float = 0.01, level: float = 0.95,
              filled: np.ndarray | None = None, skill=1.0) -> np.ndarray:
    """``risk_per_trade`` / ES at ``level`` of each row of ``trade_returns`` [W, S] over its ``filled`` paths,
    the samples moved to the conditional mean ``skill`` x mean, capped at 1.0 (1.0 where the tail does not lose);
    0 for a row with no filled path or no expected gain."""
    m, n = _filled(trade_returns, filled)
    mu = _filled_mean(trade_returns, m, n)
    b = np.broadcast_to(np.asarray(skill, dtype=np.float64), mu.shape)
    es = expected_shortfall(trade_returns - ((1.0 - b) * mu)[:, None], level, filled)  # at the conditional mean
    size = np.minimum(np.divide(risk_per_trade, es, out=np.ones_like(es), where=es > 0), 1.0)
    return np.where(np.isnan(es) | ~(b * mu > 0), 0.0, size)  # no path fills, or no expected gain


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


@dataclass(frozen=True)
class OrderSamples:
    """Orders ``[W]`` with their long trade's sample returns ``[W, S]`` (:func:`trade_return_samples`) and the
    paths that fill them (:func:`trade_fills`): computed once, read for the forecast means the skill learns from
    and for the sizes."""

    side: np.ndarray
    returns: np.ndarray
    filled: np.ndarray

    @classmethod
    def of(cls, side, entry_limit, take_profit, close, samples: dict) -> "OrderSamples":
        """From ``samples`` (``{"close"|"high"|"low": [W, S]}`` horizon-1 sample returns relative to ``close``)."""
        side = np.asarray(side)
        returns = trade_return_samples(side, entry_limit, take_profit, close, samples["close"], samples["high"],
                                       samples["low"])
        return cls(side, returns, trade_fills(side, entry_limit, close, samples["high"], samples["low"]))

    @property
    def means(self) -> np.ndarray:
        """The forecast mean ``m`` ``[W]`` of each order's trade return (the side's return) over the paths that
        fill it; NaN for a flat order or one no path fills."""
        side = self.side.astype(np.float64)
        trade = side[:, None] * self.returns
        m, n = _filled(trade, self.filled)
        return np.where((side != 0) & (n > 0), _filled_mean(trade, m, n), np.nan)

    def sizes(self, policy: str, *, kelly_cap: float = 1.0, risk_per_trade: float = 0.01,
              kelly_fraction: float = 0.25, skill=1.0) -> np.ndarray:
        """:func:`position_sizes` of these orders over the paths that fill them, each mean scaled by ``skill``."""
        return position_sizes(self.returns, self.side.astype(np.int64), policy, kelly_cap=kelly_cap,
                              risk_per_trade=risk_per_trade, kelly_fraction=kelly_fraction, filled=self.filled,
                              skill=skill)


def skill_estimate(n, mm, mr, rr) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(slope b, its standard error, the shrunk factor b*)`` of the regression through the origin of realised
    returns r on forecast means m from the sums over ``n`` orders ``sum(m^2)``, ``sum(m r)``, ``sum(r^2)``
    (module docstring); elementwise over arrays. Under :data:`MIN_SKILL_TRADES` orders b and se are NaN and b* 0."""
    n, mm, mr, rr = (np.asarray(x, dtype=np.float64) for x in (n, mm, mr, rr))
    enough = (n >= MIN_SKILL_TRADES) & (mm > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(enough, mr / mm, np.nan)
        se = np.where(enough, np.sqrt(np.maximum(rr - slope * mr, 0.0) / (n - 1.0) / mm), np.nan)
        keep = np.maximum(0.0, 1.0 - np.square(se) / np.square(slope))
        factor = np.where(enough & (slope > 0), slope * np.where(se > 0, keep, 1.0), 0.0)
    return slope, se, factor


@dataclass(frozen=True)
class Skill:
    """A strategy's running sums over its settled orders of (forecast mean m, realised unit-size return r):
    what its next order's size reads (:attr:`factor`). ``add`` one order's pair once it has settled."""

    trades: int = 0
    mm: float = 0.0
    mr: float = 0.0
    rr: float = 0.0

    def add(self, m: float, r: float) -> "Skill":
        """These sums with one more order; unchanged when it had no forecast mean or did not fill (NaN)."""
        if not (np.isfinite(m) and np.isfinite(r)):
            return self
        m, r = np.float64(m), np.float64(r)
        return Skill(self.trades + 1, float(self.mm + m * m), float(self.mr + m * r), float(self.rr + r * r))

    @property
    def factor(self) -> float:
        """The shrunk slope b* the next order's mean is scaled by (0 before :data:`MIN_SKILL_TRADES` orders)."""
        return float(skill_estimate(self.trades, self.mm, self.mr, self.rr)[2])

    def describe(self) -> dict:
        """``trades``, ``slope``, ``slope_se`` (None before the minimum) and ``factor``: printed and stored."""
        slope, se, factor = (float(x) for x in skill_estimate(self.trades, self.mm, self.mr, self.rr))
        return {"trades": self.trades, "slope": None if np.isnan(slope) else slope,
                "slope_se": None if np.isnan(se) else se, "factor": factor}


def walk_forward_skill(means, realised, delay: int = 0) -> tuple[np.ndarray, Skill]:
    """The factor b* each window ``k`` of one strategy sizes with, from the windows ``j < k - delay`` alone
    (``[W]``), and the :class:`Skill` the next decision reads (every window but the last ``delay``). ``means``
    ``[W]``: the forecast trade means (:attr:`OrderSamples.means`); ``realised`` ``[W]``: the unit-size gross return
    where the order filled, NaN where it did not. ``delay`` 1 under the next-open exit rule: window k-1 exits at
    the open after window k's decision, so its outcome is not known to it
    (:data:`marketcast.backtest.engine.Exits.delay`). Running sums in window order, as :meth:`Skill.add` makes
    them one window at a time."""
    m, r = np.asarray(means, dtype=np.float64), np.asarray(realised, dtype=np.float64)
    ok = np.isfinite(m) & np.isfinite(r)
    m, r = np.where(ok, m, 0.0), np.where(ok, r, 0.0)
    sums = [np.cumsum(x) for x in (ok.astype(np.int64), m * m, m * r, r * r)]
    lag = 1 + delay
    before = [np.concatenate([np.zeros(min(lag, len(s)), dtype=s.dtype), s[:-lag]]) for s in sums]
    last = len(m) - 1 - delay
    final = Skill(*(int(sums[0][last]) if last >= 0 else 0,
                    *(float(s[last]) if last >= 0 else 0.0 for s in sums[1:])))
    return skill_estimate(*before)[2], final


def order_sizes(side, entry_limit, take_profit, close, samples: dict, policy: str = "fixed", *,
                kelly_cap: float = 1.0, risk_per_trade: float = 0.01, kelly_fraction: float = 0.25,
                skill=1.0) -> np.ndarray:
    """Sizes ``[W]`` of orders ``[W]`` from ``samples`` (``{"close"|"high"|"low": [W, S]}`` horizon-1 sample
    returns relative to ``close``): :meth:`OrderSamples.sizes`, with each order's mean scaled by ``skill``
    (scalar or ``[W]``: the measured factor b*, :func:`walk_forward_skill` or :attr:`Skill.factor`); ``fixed`` is
    1.0 for every window (flat ones too: they trade nothing either way). One window (the live planner) and many
    (the engine) give the same sizes bit for bit: every reduction runs along each row's samples."""
    if policy == "fixed":
        _check(policy, kelly_cap, risk_per_trade, 0.95, kelly_fraction)
        return np.ones(len(np.asarray(side)))
    return OrderSamples.of(side, entry_limit, take_profit, close, samples).sizes(
        policy, kelly_cap=kelly_cap, risk_per_trade=risk_per_trade, kelly_fraction=kelly_fraction, skill=skill)


def skill_text(skills: dict[str, Skill]) -> str:
    """Each strategy's measured skill after the last window: the factor b*, then slope +- standard error over the
    orders it rests on (``simple 0 (-1.80 +- 1.73 over 70), ci_guard 0 (1 of 20 orders)``)."""
    parts = []
    for name, skill in skills.items():
        d = skill.describe()
        fit = (f"{d['slope']:.2f} +- {d['slope_se']:.2f} over {d['trades']}" if d["slope"] is not None else
               f"{d['trades']} of {MIN_SKILL_TRADES} orders")
        parts.append(f"{name} {d['factor']:.3g} ({fit})")
    return ", ".join(parts)


def sizing_note(config, skills: dict[str, Skill]) -> str:
    """One line: the rule of ``config`` (a :class:`~marketcast.backtest.config.BacktestConfig`) with its fraction
    and cap, and :func:`skill_text`; '' for fixed sizing."""
    if config.sizing == "fixed":
        return ""
    rule = (f"kelly sizing {config.kelly_fraction:g} x b* mu / sigma^2 within an ES budget of "
            f"{config.risk_per_trade:g}, cap {config.kelly_cap:g}"
            if config.sizing == "kelly" else
            f"cvar sizing: risk per trade {config.risk_per_trade:g} at the conditional mean b* mu, cap 1")
    return f"{rule}; measured skill b* (slope +- se over orders): {skill_text(skills)}"
