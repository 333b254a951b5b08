"""What a trade costs, per asset class: the one place that knows fees, spreads, slippage and short borrow.

Every fill pays, per side, the fee plus half the quoted spread plus slippage (all fractions of the traded
price); a short also pays borrow for the bar it is held: ``borrow_rate / periods_per_year`` (each decision is
held one bar: open to close, or open to next open under the next-open exit rule). The backtest (:func:`marketcast.backtest.fills.settle` and ``settle_all``), the
live planner and the paper broker all build their :class:`Costs` with :meth:`Costs.for_asset`, so a replay
pays what the backtest paid.

Defaults (basis points; borrow as a rate a year) and why:

========  ====  ===========  ========  ======  ======================================================================
class     fee   half-spread  slippage  borrow  source / reasoning
========  ====  ===========  ========  ======  ======================================================================
stock     5     1            1         0.5%    Alpaca stock trades are commission-free, the 5 bp fee is the
                                               project's long-standing allowance for regulatory fees and a retail
                                               broker's worse execution; liquid US large caps and ETFs quote about a
                                               1-cent spread on a $100+ price (~1 bp each side); an easy-to-borrow
                                               stock lends at general-collateral rates, ~0.3-0.5% a year.
crypto    25    5            2         0       Alpaca's tier-1 (lowest 30-day volume) crypto *taker* fee is 0.25%
                                               (https://docs.alpaca.markets/docs/crypto-fees; maker 0.15%): market
                                               entries take liquidity. BTC/ETH on a retail venue quote ~10 bp wide.
                                               Spot crypto is long-only here (no borrow).
forex     0.3   0.5          0.2       0       Majors (EURUSD) quote ~1 pip (~1 bp) wide on ECN venues; an ECN
                                               commission of ~$20-30 per million per side is ~0.3 bp. A short in FX is
                                               a long in the other currency: carry is not modelled (borrow 0).
future    0.1   0.25         0.25      0       An E-mini S&P tick (0.25 pt) is ~0.5 bp of a ~$250k contract: half a
                                               tick each side; ~$2.50 a side of commission and exchange fees is
                                               ~0.1 bp. Selling a future short borrows nothing.
========  ====  ===========  ========  ======  ======================================================================

``marketcast backtest --fee --half-spread-bps --slippage-bps --borrow-rate`` override each for a run (all
symbols); the values used are in every report and the run store.
"""

from __future__ import annotations

from dataclasses import dataclass

from marketcast.errors import ConfigError

BP = 1e-4


@dataclass(frozen=True)
class AssetCosts:
    """Default costs of one asset class: fractions per side, and the short-borrow rate a year."""

    fee: float
    half_spread: float
    slippage: float
    borrow_rate: float


DEFAULT_COSTS = {
    "stock": AssetCosts(fee=5 * BP, half_spread=1 * BP, slippage=1 * BP, borrow_rate=0.005),
    "crypto": AssetCosts(fee=25 * BP, half_spread=5 * BP, slippage=2 * BP, borrow_rate=0.0),
    "forex": AssetCosts(fee=0.3 * BP, half_spread=0.5 * BP, slippage=0.2 * BP, borrow_rate=0.0),
    "future": AssetCosts(fee=0.1 * BP, half_spread=0.25 * BP, slippage=0.25 * BP, borrow_rate=0.0),
}


def defaults_text() -> str:
    """The defaults of every asset class as the help texts print them, fee, half-spread and slippage apart
    (``crypto: fee 25 + half-spread 5 + slippage 2 = 32 bp per side``): generated from :data:`DEFAULT_COSTS`, so
    the help says what a run charges."""
    def bp(x: float) -> str:
        return f"{round(x / BP, 9):g}"

    return "; ".join(f"{name}: fee {bp(c.fee)} + half-spread {bp(c.half_spread)} + slippage {bp(c.slippage)} = "
                     f"{bp(c.fee + c.half_spread + c.slippage)} bp per side" for name, c in DEFAULT_COSTS.items())


def check_costs(fee: float | None = None, spread: float | None = None, slippage: float | None = None,
                borrow_rate: float | None = None) -> None:
    """Raise :class:`ConfigError` (exit 2, one line) for a negative or absurd cost; None = the default."""
    for name, value, high in (("--fee", fee, 0.5), ("spread", spread, 0.5), ("slippage", slippage, 0.5),
                              ("--borrow-rate", borrow_rate, 10.0)):
        if value is None:
            continue
        if value != value:
            raise ConfigError(f"{name} must be a number, got nan")
        if value < 0:
            raise ConfigError(f"{name} must not be negative, got {value:g}")
        if value > high:  # inclusive, as --help's [0..0.5] says (commands/options.py FEE_RANGE)
            raise ConfigError(f"{name} must be at most {high:g}, got {value:g}")


@dataclass(frozen=True)
class Costs:
    """What one fill pays, as fractions of the traded price: ``fee`` per side, ``spread`` the full quoted
    spread (half paid per side), ``slippage`` per side, and ``borrow`` per bar held short.

    ``Costs(fee)`` alone is fee-only (what tests about other things pass); :meth:`for_asset` fills in the
    asset class's defaults."""

    fee: float
    spread: float = 0.0
    slippage: float = 0.0
    borrow: float = 0.0  # per bar held short (borrow_rate / periods_per_year)
    borrow_rate: float = 0.0  # a year, for reports

    @property
    def per_side(self) -> float:
        return self.fee + self.spread / 2.0 + self.slippage

    def round_trip(self, side: int) -> float:
        """Entry and exit of one bar's position on ``side`` (+1 long, -1 short): two sides, plus borrow if short."""
        return 2.0 * self.per_side + (self.borrow if side < 0 else 0.0)

    @classmethod
    def for_asset(cls, asset_class: str, fee: float | None = None, spread: float | None = None,
                  slippage: float | None = None, borrow_rate: float | None = None,
                  periods_per_year: float | None = None) -> "Costs":
        """The costs of ``asset_class``: each argument overrides its default (None keeps it). ``spread`` is the
        full quoted spread; borrow is charged per bar as ``borrow_rate / periods_per_year`` (none without it)."""
        check_costs(fee, spread, slippage, borrow_rate)
        d = DEFAULT_COSTS[asset_class]
        rate = d.borrow_rate if borrow_rate is None else borrow_rate
        return cls(
            fee=d.fee if fee is None else fee,
            spread=2.0 * d.half_spread if spread is None else spread,
            slippage=d.slippage if slippage is None else slippage,
            borrow=rate / periods_per_year if periods_per_year else 0.0,
            borrow_rate=rate,
        )

    def describe(self) -> dict:
        """The costs in basis points (and the borrow rate a year), for reports and the run store."""
        bp = lambda x: round(x / BP, 9)  # noqa: E731  (14.000000000000002 bp is 14 bp)
        return {"fee_bps": bp(self.fee), "half_spread_bps": bp(self.spread / 2.0), "slippage_bps": bp(self.slippage),
                "borrow_rate": self.borrow_rate, "borrow_per_bar_bps": bp(self.borrow),
                "round_trip_bps": bp(2.0 * self.per_side)}

    def note(self) -> str:
        """One line for the terminal and Markdown."""
        return (f"costs per side: fee {self.fee / BP:g} bp + half-spread {self.spread / 2.0 / BP:g} bp + slippage "
                f"{self.slippage / BP:g} bp = {self.per_side / BP:g} bp; short borrow {self.borrow_rate:.2%} a year "
                f"({self.borrow / BP:.3g} bp a bar)")
