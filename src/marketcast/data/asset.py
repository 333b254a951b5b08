"""Asset classes and what follows from them: whether shorting is allowed and the market calendar. What trading
one costs (fee, spread, slippage, borrow) is the backtest's cost model, :mod:`marketcast.backtest.costs`.

============  =====  ==========================================================================
class         short  calendar (see :mod:`marketcast.data.calendar`)
============  =====  ==========================================================================
``stock``     yes    ``XNYS``: New York Stock Exchange sessions, holidays and early closes
``crypto``    no     ``24/7``: every day around the clock (UTC days)
``forex``     yes    ``FX24x5``: Sunday 17:00 to Friday 17:00 New York, five 24-hour sessions
``future``    yes    ``CMES``: CME Globex, 17:00 Chicago the day before to 17:00, CME holidays
============  =====  ==========================================================================

Crypto is long-only because spot crypto cannot be sold short at the brokers marketcast trades with.

The bar times decide first (:mod:`marketcast.data.detect`: weekend bars mean crypto, 24/5 means forex); the name
breaks a tie. How a name is classified (:func:`classify`; ``--asset-class`` overrides it, for all symbols or one):

* ``ES=F``, ``/ES``: a future (yfinance's ``=F`` suffix, the ``/`` prefix of futures platforms).
* ``EURUSD``, ``EUR/USD``, ``EUR-USD``, ``EUR_USD``, ``EURUSD=X``, ``JPY=X``: forex, when both sides are ISO
  4217 currency codes (from ``pycountry``; yfinance's ``JPY=X`` is USDJPY).
* ``BTC-USD``, ``ETH/USDT``, ``PEPE-EUR``: crypto, a base that is not a currency quoted in a currency or a
  stablecoin; without a separator (``BTCUSD``, ``ETHUSDT``) only for the crypto tickers listed below.
* Anything else (``AAPL``, ``BRK-B``, ``SP500``) is a stock.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path
from typing import Optional, Sequence

from marketcast.errors import ConfigError

ASSET_CLASSES = ("stock", "crypto", "forex", "future")


@dataclass(frozen=True)
class AssetRules:
    """The conventions of one asset class."""

    allow_short: bool
    calendar: str  # a name :func:`marketcast.data.calendar.calendar_for` knows


RULES = {
    "stock": AssetRules(allow_short=True, calendar="XNYS"),
    "crypto": AssetRules(allow_short=False, calendar="24/7"),
    "forex": AssetRules(allow_short=True, calendar="FX24x5"),
    "future": AssetRules(allow_short=True, calendar="CMES"),
}

# ISO 4217 codes that are units of account or test codes, never a side of a traded pair.
_NOT_TRADED = {"XBA", "XBB", "XBC", "XBD", "XDR", "XSU", "XTS", "XUA", "XXX"}
# Quote currencies of crypto pairs besides fiat: stablecoins and the crypto majors.
CRYPTO_QUOTES = ("USDT", "USDC", "DAI", "BUSD", "FDUSD", "TUSD", "USDP", "PYUSD", "BTC", "ETH")
CRYPTO_TICKERS = (
    "BTC", "ETH", "SOL", "XRP", "ADA", "DOGE", "DOT", "LTC", "BCH", "LINK", "AVAX", "MATIC", "POL", "UNI",
    "XLM", "ATOM", "ETC", "FIL", "TRX", "SHIB", "BNB", "AAVE", "ALGO", "NEAR", "APT", "ARB", "OP", "SUI",
    "TON", "PEPE", "XTZ", "EOS", "XMR", "ZEC", "DASH", "MKR", "COMP", "CRV", "SUSHI", "YFI", "GRT", "BAT",
    "SAND", "MANA", "AXS", "HBAR", "ICP", "VET", "INJ", "RNDR", "RENDER", "STX", "IMX", "KAS", "SEI", "TIA",
    "WIF", "BONK", "JUP", "LDO", "RUNE", "FTM", "HYPE", "TAO", "ENA", "ONDO", "QNT", "EGLD", "FLOW",
    "CHZ", "KSM", "ZRX", "1INCH", "SNX", "ENS", "GALA", "APE", "BLUR", "DYDX", "USDT", "USDC", "DAI",
)
_SPLIT = re.compile(r"[/\-_ ]")


@lru_cache(maxsize=1)
def currencies() -> frozenset[str]:
    """Tradeable ISO 4217 currency codes (``pycountry``'s table, less the units of account), read from
    pycountry's database file without importing it: its import looks its own version up among the installed
    distributions (0.02 s of a default backtest, which classifies NASDAQ by these codes)."""
    spec = find_spec("pycountry")  # located, not imported
    table = Path(spec.submodule_search_locations[0], "databases", "iso4217.json") if spec and \
        spec.submodule_search_locations else None
    if table is None or not table.is_file():  # a pycountry laid out otherwise: ask it
        import pycountry

        return frozenset(c.alpha_3 for c in pycountry.currencies) - _NOT_TRADED
    return frozenset(c["alpha_3"] for c in json.loads(table.read_text(encoding="utf-8"))["4217"]) - _NOT_TRADED


def _crypto_quote(code: str) -> bool:
    return code in CRYPTO_QUOTES or code in currencies()


# Parts of a file name that tag the bars rather than name the instrument: BTCUSD-monthly, EUR_USD_H1, AAPL-1d-2024.
_TAG = re.compile(r"\d+[A-Z]*|[A-Z]{1,3}\d+|(HOURLY|DAILY|WEEKLY|MONTHLY|QUARTERLY|YEARLY|INTRADAY|MINUTE|"
                  r"MINUTES|HOUR|HOURS|DAY|DAYS|WEEK|MONTH|BARS|OHLC|OHLCV|DATA|HISTORY|PRICES|[MHDW])")


#: why a symbol that matches no rule reads as a stock: the default, not evidence
NO_PATTERN = "no futures, forex or crypto pattern, so a stock"


def classify(symbol: str) -> tuple[str, str]:
    """``(asset class, why)`` from the symbol alone (see the module docstring for the rules). Trailing parts of
    a file name that tag the bars (``BTCUSD-monthly``, ``EUR_USD_H1``, ``ETH-USD-1h``) are read past."""
    found = _classify(symbol)
    parts = [p for p in _SPLIT.split(symbol.strip().upper()) if p]
    while found[0] == "stock" and len(parts) > 1 and _TAG.fullmatch(parts[-1]):
        parts.pop()
        cls, why = _classify("-".join(parts) if len(parts) == 2 else "".join(parts))
        if cls != "stock":
            found = cls, f"{symbol}: read as {'-'.join(parts) if len(parts) == 2 else ''.join(parts)}; {why}"
    return found


def _classify(symbol: str) -> tuple[str, str]:
    s = symbol.strip().upper()
    fiat = currencies()
    if s.endswith("=F") or (s.startswith("/") and len(s) > 1):
        return "future", f"{symbol}: the {'=F suffix' if s.endswith('=F') else '/ prefix'} marks a futures contract"
    if s.endswith("=X"):
        body = s[:-2]
        if len(body) == 3 and body in fiat:
            return "forex", f"{symbol}: yfinance's =X quote of USD{body}, both ISO 4217 currencies"
        if len(body) == 6 and body[:3] in fiat and body[3:] in fiat:
            return "forex", f"{symbol}: yfinance's =X quote of {body[:3]}/{body[3:]}, both ISO 4217 currencies"
    parts = [p for p in _SPLIT.split(s) if p]
    if len(parts) == 2:
        base, quote = parts
        if base in fiat and quote in fiat and base != quote:
            return "forex", f"{symbol}: {base} and {quote} are both ISO 4217 currencies"
        if base not in fiat and _crypto_quote(quote) and re.fullmatch(r"[A-Z0-9]{2,12}", base):
            return "crypto", f"{symbol}: {base} quoted in {quote}, a crypto pair ({base} is no ISO 4217 currency)"
    if re.fullmatch(r"[A-Z]{6}", s) and s[:3] in fiat and s[3:] in fiat and s[:3] != s[3:]:
        return "forex", f"{symbol}: {s[:3]} and {s[3:]} are both ISO 4217 currencies"
    for base in sorted(CRYPTO_TICKERS, key=len, reverse=True):
        quote = s[len(base):]
        if s.startswith(base) and quote and _crypto_quote(quote):
            return "crypto", f"{symbol}: {base} is a crypto ticker, quoted in {quote}"
    return "stock", f"{symbol}: {NO_PATTERN}"


def check_asset_class(asset_class: str) -> str:
    if asset_class not in ASSET_CLASSES:
        raise ConfigError(f"asset class {asset_class!r} is not one of {', '.join(ASSET_CLASSES)}; "
                          "fix --asset-class")
    return asset_class


def infer_asset_class(symbol: str, override: str | None = None) -> str:
    """The class ``override`` names, else :func:`classify`'s."""
    return check_asset_class(override) if override is not None else classify(symbol)[0]


def explain_asset_class(symbol: str, asset_class: str) -> str:
    """Why ``symbol`` is ``asset_class``: the symbol rule that says so, or that it was set by hand."""
    guess, why = classify(symbol)
    if guess == asset_class:
        return why
    return f"{symbol}: set to {asset_class} by --asset-class (the symbol alone reads as {guess})"


def asset_classes(values: Optional[list[str]], symbols: Sequence[str]) -> dict[str, Optional[str]]:
    """``--asset-class CLASS`` (every symbol) and ``--asset-class SYMBOL=CLASS`` (one; wins) -> the class of each
    symbol (None: inferred from the symbol)."""
    names = [s.upper() for s in symbols]
    everyone, per_symbol = None, {}
    for value in values or []:
        symbol, _, cls = value.rpartition("=")
        if symbol:
            if symbol.upper() not in names:
                raise ConfigError(f"--asset-class {value}: {symbol.upper()} is not among the symbols given "
                                  f"({', '.join(names)})")
            per_symbol[symbol.upper()] = check_asset_class(cls.strip().lower())
        else:
            everyone = check_asset_class(cls.strip().lower())
    return {s: per_symbol.get(s, everyone) for s in names}
