"""Which Alpaca host a run talks to: the flags decide, ``APCA_API_BASE_URL`` may only agree.

alpaca-py sends every request to ``url_override`` when one is given and ignores ``paper`` then
(alpaca-py 0.44.0 ``alpaca/trading/client.py:80-82``: ``url_override if url_override else
BaseURL.TRADING_PAPER if paper else BaseURL.TRADING_LIVE``), so an exported ``APCA_API_BASE_URL=https://api.alpaca.markets`` would turn a
default paper run into live trading while the records said paper. Here the mode comes from the flags only:

* unset: Alpaca's host for the mode (``paper-api.alpaca.markets`` or ``api.alpaca.markets``);
* Alpaca's host of the *same* mode: used (a trailing ``/v2`` is dropped, alpaca-py adds it);
* Alpaca's host of the *other* mode: one :class:`~marketcast.errors.ConfigError` (exit 2) before any request;
* a loopback host (127.0.0.1, ::1, localhost: a local test server or a tunnel): used, with a warning, and
  recorded as the endpoint; any other host is refused (keys are never sent anywhere else).

``APCA_API_DATA_URL`` follows the same host rule for the market-data host (``data.alpaca.markets``). A URL is
shown (records, status, errors, the log) with its secrets redacted (:func:`marketcast.trade.ops.redact.redact_url`:
``https://user:pass@host`` is ``https://***@host``).
"""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import urlsplit

from marketcast.errors import ConfigError
from marketcast.trade.ops.redact import redact_url

log = logging.getLogger("marketcast.trade")

PAPER_HOST, LIVE_HOST, DATA_HOST = "paper-api.alpaca.markets", "api.alpaca.markets", "data.alpaca.markets"


@dataclass(frozen=True)
class Endpoint:
    url: str
    mode: str  # paper | live
    custom: bool = False  # a loopback host, not Alpaca's

    def __str__(self) -> str:
        return f"{redact_url(self.url)} ({self.mode}{', local test server' if self.custom else ''})"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _clean(url: str, var: str) -> tuple[str, str]:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{var}={redact_url(url)!r} is not a URL; unset it")
    path = parts.path.rstrip("/")
    path = path[:-3] if path.endswith("/v2") else path
    return f"{parts.scheme}://{parts.netloc}{path}", parts.hostname.lower()


def trading_endpoint(live: bool, env: Mapping[str, str], warn: bool = True) -> Endpoint:
    """The trading host for ``live`` (the flags), checked against ``APCA_API_BASE_URL`` (``warn``: log a
    local test server)."""
    mode, host = ("live", LIVE_HOST) if live else ("paper", PAPER_HOST)
    raw = env.get("APCA_API_BASE_URL", "")
    if not raw:
        return Endpoint(f"https://{host}", mode)
    url, given = _clean(raw, "APCA_API_BASE_URL")
    raw = redact_url(raw.strip())  # as the errors and the log show it
    if given == host:
        if not url.startswith("https://"):
            raise ConfigError(f"APCA_API_BASE_URL={raw} must use https:// for Alpaca's {mode} host")
        return Endpoint(url, mode)
    if given in (PAPER_HOST, LIVE_HOST):
        if live:
            raise ConfigError(f"APCA_API_BASE_URL={raw} is Alpaca's PAPER host but --live was given; unset it "
                              f"(or set https://{LIVE_HOST}) to trade live, or drop --live")
        raise ConfigError(f"APCA_API_BASE_URL={raw} is Alpaca's LIVE host but this run is paper (the default); "
                          f"unset APCA_API_BASE_URL, or pass --live --i-understand-live-trading to trade real money")
    if _loopback(given):
        if warn:
            log.warning("APCA_API_BASE_URL=%s is a local test server, not Alpaca: %s orders go there", redact_url(url),
                        mode)
        return Endpoint(url, mode, custom=True)
    raise ConfigError(f"APCA_API_BASE_URL={raw} is not an Alpaca host ({PAPER_HOST}, {LIVE_HOST}) nor a local "
                      f"test server (127.0.0.1); the keys are not sent to it. Unset it")


def data_url(env: Mapping[str, str]) -> str | None:
    """``APCA_API_DATA_URL`` if set (Alpaca's data host or a loopback server), else None (alpaca-py's default)."""
    raw = env.get("APCA_API_DATA_URL", "")
    if not raw:
        return None
    url, host = _clean(raw, "APCA_API_DATA_URL")
    if host == DATA_HOST or _loopback(host):
        return url
    raise ConfigError(f"APCA_API_DATA_URL={redact_url(raw.strip())} is not Alpaca's data host ({DATA_HOST}) nor "
                      f"a local test server; unset it")
