"""Asset-class inference and the per-class conventions that follow from it."""

from __future__ import annotations

import re

from marketcast.errors import ConfigError

ASSET_CLASSES = ("stock", "crypto")
PERIODS_PER_YEAR = {"stock": 252, "crypto": 365}
DEFAULT_FEE = {"stock": 0.0005, "crypto": 0.0015}

_CRYPTO = re.compile(r"^[A-Z0-9]{2,10}[-/]?(USD|USDT|USDC)$")


def infer_asset_class(symbol: str, override: str | None = None) -> str:
    """``BTCUSD``, ``ETH-USD``, ``SOL/USDT`` are crypto; everything else is a stock unless overridden."""
    if override is not None:
        if override not in ASSET_CLASSES:
            raise ConfigError(f"asset class {override!r} is not one of {', '.join(ASSET_CLASSES)}")
        return override
    return "crypto" if _CRYPTO.match(symbol.upper()) else "stock"
