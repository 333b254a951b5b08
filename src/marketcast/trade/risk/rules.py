"""What the broker accepts, checked before an order leaves the loop (LEAN's brokerage models: a price and size
grid, the order types and times in force an asset allows, and whether the account can carry the order).

The facts, as Alpaca documents them:

* stock limit prices: at most 2 decimals at or above $1.00, 4 below; anything finer is refused with 422
  ``{"code": 42210000, "message": "invalid limit_price 290.123. sub-penny increment does not fulfill minimum
  pricing criteria"}`` (https://docs.alpaca.markets/docs/orders-at-alpaca, "Sub-penny increments for limit
  orders"); a take-profit leg's ``take_profit.limit_price`` is held to the same grid;
* crypto: ``price_increment``, ``min_order_size`` and ``min_trade_increment`` come with each asset from
  ``GET /v2/assets`` (https://docs.alpaca.markets/docs/crypto-trading); time in force ``gtc`` or ``ioc`` only
  (https://docs.alpaca.markets/docs/crypto-orders); never short; the fee is charged on the asset received,
  so a buy of ``q`` leaves at most ``q`` less the fee in the position (tier 1 is the dearest at 25 bps);
* fractional shares: only for ``fractionable`` assets, as simple ``day`` orders, never short, up to 9
  decimals (https://docs.alpaca.markets/docs/fractional-trading, "requested asset is not fractionable");
* shorting a stock needs ``shortable`` and ``easy_to_borrow`` (asset entity, ``GET /v2/assets/{symbol}``);
* opening orders draw on buying power, open orders included (orders-at-alpaca, "Buying Power"); crypto is not
  marginable and draws on ``non_marginable_buying_power`` (crypto-trading, "Margin and Short Selling": "orders
  are evaluated against non_marginable_buying_power"); an opening short is valued at "MAX(order's limit price,
  3% above the current ask price) * order quantity", a market short at "(3% above the current ask price) *
  order quantity" (orders-at-alpaca, "Buying Power"); selling more than a long position's ``qty_available`` is
  refused with 403 "insufficient qty available for order (requested: 15, available: 11)" (reported in
  QuantConnect/Lean#3875).

What the account's state adds (wash trades, pattern-day-trader protection, the take-profit's base price) is
in :mod:`marketcast.trade.risk.protections`, whose :func:`~marketcast.trade.risk.protections.refusals` is
the one answer to "would this venue accept this order?".

Rounding is direction-aware and never more aggressive than the decision: a buy price goes down, a sell price
up, so an entry limit never pays more and a take-profit (the opposite side) never moves toward the entry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

from marketcast.trade.types import BUY, CLS, DAY, FINEST_QTY, GTC, IOC, LIMIT, SELL, Asset, OrderRequest, dec

CRYPTO_COLLAR = 0.02  # a crypto market order becomes a limit at ask x (1 + collar): valued so at the broker
CRYPTO_FEE_CAP = 0.0025  # Alpaca crypto, tier 1 taker: the most of a bought quantity a fill can cost
CRYPTO_TIME_IN_FORCE = (GTC, IOC)
SHORT_MARKUP = 0.03  # an opening short is valued at least 3 % above the ask (orders-at-alpaca, "Buying Power")


def round_price(price: float, asset: Asset, side: str) -> float:
    """``price`` on the asset's grid, down for a buy, up for a sell (never more aggressive)."""
    tick = asset.tick(price)
    if tick is None:
        return float(price)
    steps = (dec(price) / tick).to_integral_value(ROUND_FLOOR if side == BUY else ROUND_CEILING)
    return float(steps * tick)


def round_qty(qty: float, step: Decimal) -> float:
    """``qty`` down to a multiple of ``step``."""
    if qty <= 0 or not math.isfinite(qty):
        return 0.0
    return float((dec(qty) / step).to_integral_value(ROUND_FLOOR) * step)


def on_grid(value: float, step: Decimal | None) -> bool:
    return step is None or (dec(value) / step) == (dec(value) / step).to_integral_value()


def opposite(side: str) -> str:
    return SELL if side == BUY else BUY


@dataclass(frozen=True)
class Check:
    """The outcome of :func:`conform`: the order to send (None if it cannot be made valid), why not, and what
    conforming changed (for the log and the plan)."""

    request: OrderRequest | None
    reasons: tuple[str, ...] = ()
    changes: tuple[str, ...] = ()


def conform(request: OrderRequest, asset: Asset) -> Check:
    """Round prices (by side) and size (down) onto the broker's grid, then check what rounding cannot fix."""
    changes: list[str] = []
    tif = request.time_in_force
    if asset.crypto and tif not in CRYPTO_TIME_IN_FORCE and tif != CLS:  # a crypto cls is refused, never moved
        tif = GTC
        changes.append(f"time in force {request.time_in_force} -> gtc (crypto)")
    limit, tp = request.limit_price, request.take_profit
    if limit is not None:
        limit = round_price(limit, asset, request.side)
    if tp is not None:
        tp = round_price(tp, asset, opposite(request.side))
    qty = round_qty(request.qty, asset.qty_step)
    for name, before, after in (("limit", request.limit_price, limit), ("take-profit", request.take_profit, tp),
                                ("qty", request.qty, qty)):
        if before is not None and after != before:
            changes.append(f"{name} {before!r} -> {after!r}")
    reasons = []
    if qty <= 0:
        reasons.append(f"qty {request.qty:g} rounds down to 0 on the {asset.qty_step} grid")
    if (limit is not None and limit <= 0) or (tp is not None and tp <= 0):
        reasons.append("a price rounds down to 0 on the broker's price grid")
    if reasons:
        return Check(None, tuple(reasons), tuple(changes))
    conformed = replace(request, qty=qty, limit_price=limit, take_profit=tp, time_in_force=tif)
    reasons = violations(conformed, asset)
    return Check(None if reasons else conformed, tuple(reasons), tuple(changes))


def violations(request: OrderRequest, asset: Asset) -> list[str]:
    """Why the broker would refuse ``request`` for ``asset`` on its own (the order's shape, not the account),
    in Alpaca's words where it documents them."""
    out = []
    if not asset.tradable:
        out.append(f"asset {asset.symbol} is not tradable")
    prices = [("limit_price", request.limit_price, request.side)] if request.type == LIMIT else []
    if request.take_profit is not None:
        prices.append(("take_profit.limit_price", request.take_profit, opposite(request.side)))
    for name, price, _ in prices:
        if not on_grid(price, asset.tick(price)):
            what = ("sub-penny increment does not fulfill minimum pricing criteria" if not asset.crypto
                    else f"not a multiple of the price increment {asset.price_increment}")
            out.append(f"invalid {name} {price!r}. {what}")
    if asset.crypto:
        if request.time_in_force not in CRYPTO_TIME_IN_FORCE:
            out.append(f"invalid crypto time_in_force {request.time_in_force}: gtc or ioc only")
        if asset.min_order_size is not None and request.qty < asset.min_order_size:
            out.append(f"qty {request.qty!r} is below the minimum order size {asset.min_order_size}")
        if not on_grid(request.qty, asset.qty_step):
            out.append(f"qty {request.qty!r} is not a multiple of the minimum trade increment {asset.qty_step}")
    elif request.take_profit is not None and request.time_in_force not in (DAY, GTC):
        # orders-at-alpaca, "Bracket Orders": "time_in_force must be "day" or "gtc"" (OTO: "the same")
        out.append(f"invalid time_in_force {request.time_in_force} for order_class oto: day or gtc only")
    elif not on_grid(request.qty, Decimal(1)):
        if not asset.fractionable:
            out.append("requested asset is not fractionable")
        if request.take_profit is not None:
            out.append("fractional orders must be simple orders")
        if request.time_in_force != "day":
            out.append("fractional orders must be day orders")
        if not on_grid(request.qty, FINEST_QTY):
            out.append(f"qty {request.qty!r} has more than 9 decimals")
    return out


def opening_value(request: OrderRequest, ask: float, crypto: bool = False) -> float:
    """What an opening order draws from buying power, as Alpaca values it: a buy at its limit (a market buy at
    ``ask``, the far side of the quote in the core session), a short at the greater of its limit and 3 % above
    ``ask`` (a market short at 3 % above ``ask``): orders-at-alpaca, "Buying Power". A ``crypto`` market buy is
    converted to a limit at the ask plus a 2 % collar (Alpaca support, "Why do I see a discrepancy between the
    notional value requested and the order value ultimately filled?": "an automatic 2% price collar on all
    crypto market orders, converting them into limit orders ... based on the last available ask price"), so it
    is valued at ``ask`` x 1.02: a market buy fits a buying power ``B`` only up to ``B / (1 + collar)``."""
    if request.side == BUY:
        if request.limit_price is not None:
            return request.qty * request.limit_price
        return request.qty * ask * ((1.0 + CRYPTO_COLLAR) if crypto else 1.0)
    floor = ask * (1.0 + SHORT_MARKUP)
    return request.qty * (max(request.limit_price, floor) if request.limit_price is not None else floor)


def account_violations(request: OrderRequest, asset: Asset, position_qty: float, available_qty: float,
                       buying_power: float, price: float) -> list[str]:
    """Why the account cannot carry ``request``: a short the asset does not allow, selling more than a long
    position has free, or an opening order beyond ``buying_power`` (what its kind may draw: for crypto the
    non-marginable buying power), valued by :func:`opening_value` with ``price`` as the ask."""
    out = []
    opening = request.side == BUY and position_qty >= 0 or request.side == SELL and position_qty <= 0
    if request.side == SELL and position_qty > 0 and request.qty > available_qty + 1e-12:
        out.append(f"insufficient qty available for order (requested: {request.qty:g}, "
                   f"available: {available_qty:g})")
    if request.side == SELL and position_qty <= 0:
        if asset.crypto:
            out.append(f"{asset.symbol}: crypto cannot be sold short")
        elif not asset.shortable:
            out.append(f"asset {asset.symbol} is not shortable")
        elif not asset.easy_to_borrow:
            out.append(f"asset {asset.symbol} is not easy to borrow")
    if opening:
        notional = opening_value(request, price, asset.crypto)
        if notional > buying_power + 1e-9:
            out.append(f"insufficient buying power (required: {notional:,.2f}, available: {buying_power:,.2f})")
    return out
