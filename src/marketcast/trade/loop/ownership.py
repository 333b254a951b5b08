"""What the loop owns at the broker, and what it does not.

The loop's orders carry its id prefix (a take-profit leg follows its parent). Its quantity of a symbol is
what its journal booked: the fills of its own orders (a buy counted net of the most fee the broker may keep
in the asset, Alpaca crypto) plus what ``trade reconcile --accept-broker`` corrected. Everything else at
the broker (the rest of a position, orders without the prefix) is foreign: reported, never touched.

A symbol the loop trades (its journal has fills or an adjustment for it) has no foreign quantity: there the
broker holding more than the journal explains, away from zero (a split, a stock dividend, a fill the journal
missed, a trade placed outside the loop), is *unexpected*. The loop cannot tell its own shares from the rest,
so it neither enters nor closes that symbol (nothing is sold to "fix" it) until ``trade reconcile
--accept-broker`` adopts the broker's quantity; other symbols trade on. For the same reason the loop never
enters a symbol someone else holds: its first fill would mix the two.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from marketcast.trade.journal.ids import CLOSE, is_loops
from marketcast.trade.types import Asset
from marketcast.trade.journal.state import Booked
from marketcast.trade.types import BUY, Order, Position, utc_time

EPS = 1e-9
ADOPT = "marketcast trade reconcile --accept-broker"


def owned(booked: Iterable[Booked], adjustments: Mapping[str, float], assets: Mapping[str, Asset],
          before: str | None = None) -> dict[str, float]:
    """Signed quantity per symbol the loop holds by its journal. With ``before`` (a decision bar): only what
    earlier bars left, plus what this bar's closes already took off (what a close at ``before`` must sell)."""
    out: dict[str, float] = dict(adjustments)
    bar = None if before is None else utc_time(before)
    for b in booked:  # bars compared as times: an adopted order's bar is the broker's spelling of its submission
        at = utc_time(b.decision_ts) if b.decision_ts else None
        if bar is not None and at is not None and not (at < bar or (at == bar and b.kind == CLOSE)):
            continue
        asset = assets.get(b.symbol)
        qty = (asset.received(b.qty) if asset is not None else b.qty) if b.side == BUY else -b.qty
        out[b.symbol] = out.get(b.symbol, 0.0) + qty
    return {s: q for s, q in out.items() if abs(q) > EPS}


def fee_slack(booked: Iterable[Booked], assets: Mapping[str, Asset]) -> dict[str, float]:
    """How much more than :func:`owned` the loop's own buys may have left per symbol: ``owned`` counts a buy net
    of the most fee the broker may keep in the asset, a cheaper fee leaves the difference (0 for stocks)."""
    out: dict[str, float] = {}
    for b in booked:
        asset = assets.get(b.symbol)
        if b.side == BUY and asset is not None:
            out[b.symbol] = out.get(b.symbol, 0.0) + b.qty - asset.received(b.qty)
    return out


def dust(asset: Asset | None) -> float:
    """A quantity below which holding is noise: under the smallest crypto order, nothing for whole shares."""
    if asset is None or not asset.crypto:
        return EPS
    return max(asset.min_order_size or 0.0, float(asset.qty_step), EPS)


@dataclass
class Book:
    """The loop's view of the account: its own quantities and working orders next to everything foreign."""

    owned: dict[str, float]
    positions: dict[str, Position]
    own_orders: list[Order] = field(default_factory=list)
    foreign_orders: list[Order] = field(default_factory=list)
    traded: frozenset[str] = frozenset()  # symbols the journal has fills or adjustments for
    slack: dict[str, float] = field(default_factory=dict)  # see fee_slack
    resolve: str = ADOPT  # the command that adopts an unexpected quantity, as the user should type it

    @classmethod
    def of(cls, owned_qty: dict[str, float], positions: list[Position], working: list[Order],
           traded: Iterable[str] = (), slack: Mapping[str, float] | None = None, resolve: str = "") -> "Book":
        return cls(owned_qty, {p.symbol: p for p in positions},
                   [o for o in working if is_loops(o.root_client_order_id)],
                   [o for o in working if not is_loops(o.root_client_order_id)],
                   frozenset(traded), dict(slack or {}), resolve or ADOPT)

    def broker_qty(self, symbol: str) -> float:
        p = self.positions.get(symbol)
        return 0.0 if p is None else p.qty

    def foreign_qty(self, symbol: str) -> float:
        return self.broker_qty(symbol) - self.owned.get(symbol, 0.0)

    def mismatches(self, assets: Mapping[str, Asset]) -> list[str]:
        """Symbols where the broker cannot be holding what the journal says the loop holds."""
        out = []
        for symbol, qty in sorted(self.owned.items()):
            if abs(qty) < dust(assets.get(symbol)):
                continue
            held = self.broker_qty(symbol)
            if (qty > 0 and held < qty - EPS) or (qty < 0 and held > qty + EPS):
                out.append(f"{symbol}: the journal says the loop holds {qty:g}, the broker shows {held:g}")
        return out

    def unexpected(self, assets: Mapping[str, Asset]) -> dict[str, str]:
        """Symbols the loop trades where the broker holds more than the journal explains, away from zero
        (beyond the dust and the fee slack of the loop's own buys), each with the line that says so. Holding
        less is :meth:`mismatches` (a halt)."""
        out = {}
        for symbol in sorted(self.traded):
            qty, held = self.owned.get(symbol, 0.0), self.broker_qty(symbol)
            extra, floor = held - qty, dust(assets.get(symbol))
            if abs(extra) < floor + self.slack.get(symbol, 0.0):
                continue
            if abs(qty) >= floor and (extra > 0) != (qty > 0):
                continue  # toward zero: the broker is short of the journal, a mismatch
            out[symbol] = (f"broker holds {held:g} {symbol}, journal {qty:g}: split or outside trade? {symbol} is "
                           f"held (no entries, nothing sold); to adopt the broker's {held:g}: {self.resolve}")
        return out

    def entry_conflicts(self, symbol: str, side: int, assets: Mapping[str, Asset]) -> list[str]:
        """Why the loop must not enter ``symbol`` on ``side`` (+1/-1) now: it holds or works it already, the
        broker holds more of it than the journal explains, or someone else holds it (the entry would trade
        against the position, or mix the loop's quantity with it)."""
        out = []
        if abs(self.owned.get(symbol, 0.0)) >= dust(assets.get(symbol)):
            out.append(f"the loop holds {self.owned[symbol]:g}")
        working = [o.client_order_id for o in self.own_orders if o.symbol == symbol]
        if working:
            out.append(f"the loop has working order(s) {', '.join(working)}")
        held_back = self.unexpected(assets).get(symbol)
        foreign = self.foreign_qty(symbol)
        if held_back:
            out.append(held_back)
        elif symbol not in self.traded and abs(foreign) >= dust(assets.get(symbol)):
            out.append(f"foreign position {foreign:g} (not the loop's): an entry would "
                       + ("trade against it" if side and (foreign > 0) != (side > 0) else
                          "mix the loop's quantity with it"))
        elif side and abs(foreign) >= dust(assets.get(symbol)) and (foreign > 0) != (side > 0):
            out.append(f"foreign position {foreign:g} (not the loop's): this entry would trade against it")
        return out

    def committed(self, assets: Mapping[str, Asset]) -> tuple[frozenset[str], float]:
        """Symbols and gross exposure the loop has committed: its quantities (at their average entry price)
        plus its working orders (at their limit), which count against every cap."""
        held, exposure = set(), 0.0
        for symbol, qty in self.owned.items():
            if abs(qty) >= dust(assets.get(symbol)):
                held.add(symbol)
                p = self.positions.get(symbol)
                exposure += abs(qty) * (p.avg_entry_price if p is not None else 0.0)
        for o in self.own_orders:
            held.add(o.symbol)
            exposure += o.qty * (o.limit_price or 0.0)
        return frozenset(held), exposure

    def foreign(self, assets: Mapping[str, Asset]) -> dict[str, dict]:
        """Foreign positions and working orders per symbol (``{symbol: {"position": qty, "orders": [...]}}``);
        an :meth:`unexpected` quantity is not foreign."""
        out: dict[str, dict] = {}
        held_back = self.unexpected(assets)
        for symbol in sorted(self.positions):
            if symbol in held_back:
                continue
            qty = self.foreign_qty(symbol)
            if abs(qty) >= dust(assets.get(symbol)):
                out.setdefault(symbol, {"position": 0.0, "orders": []})["position"] = qty
        for o in self.foreign_orders:
            out.setdefault(o.symbol, {"position": 0.0, "orders": []})["orders"].append(
                f"{o.side} {o.qty:g} {o.type} ({o.status})")
        return out
