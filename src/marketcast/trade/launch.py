"""What a trade command sets up before its first cycle: the log, and the venue the flags ask for (a broker, its
bars re-read at every look, and the loop's clock)."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import pandas as pd

from marketcast.data.bars import Bars
from marketcast.errors import ConfigError, StateError
from marketcast.paths import read_text
from marketcast.trade.journal.files import private_file
from marketcast.trade.risk.freshness import complete, newer_bar_due
from marketcast.trade.risk.markets import refuse_untraded, tradable


class StateLogHandler(logging.FileHandler):
    """``trade.log``: a record that cannot be written (a full disk) ends the run with one
    :class:`StateError` line instead of logging's traceback on stderr."""

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        exc = sys.exc_info()[1]
        raise StateError(f"{self.baseFilename}: {getattr(exc, 'strerror', None) or exc}; free disk space and run "
                         f"again") from None


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class ConsoleFormat(logging.Formatter):
    """stderr's lines: a warning is one ``warning:`` line, as every command's warnings are (the README's
    promise); the rest (``--verbose``'s INFO, errors) keep the log file's format with its time."""

    def __init__(self) -> None:
        super().__init__(LOG_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        if record.levelno == logging.WARNING:
            return "warning: " + " ".join(record.getMessage().splitlines())
        return super().format(record)


def setup_logging(state_dir: Path | None, verbose: bool) -> None:
    """stderr, plus ``state_dir/trade.log`` unless ``state_dir`` is None (a dry run writes no file)."""
    from marketcast.trade.ops.redact import RedactingFilter

    logger = logging.getLogger("marketcast")
    logger.setLevel(logging.INFO)
    for h in list(logger.handlers):
        if getattr(h, "_marketcast_trade", False):
            logger.removeHandler(h)
            h.close()
    stream = logging.StreamHandler()
    stream.setLevel(logging.INFO if verbose else logging.WARNING)
    stream.addFilter(lambda record: getattr(record, "console", True))  # said on stderr otherwise (an error line)
    handlers: list[logging.Handler] = [stream]
    if state_dir is not None:
        try:
            handlers.append(StateLogHandler(private_file(state_dir / "trade.log"), encoding="utf-8"))
        except OSError as exc:
            raise StateError(f"{state_dir / 'trade.log'}: {exc.strerror}; check permissions and free space") from None
    for h in handlers:
        h._marketcast_trade = True
        h.setFormatter(logging.Formatter(LOG_FORMAT) if h is not stream else ConsoleFormat())
        h.addFilter(RedactingFilter())
        logger.addHandler(h)


@dataclass(frozen=True)
class Market:
    """What the user said about the bars (``--asset-class``, ``--periods-per-year``); None: from the data."""

    asset_classes: Mapping[str, str | None] = field(default_factory=dict)
    periods_per_year: float | None = None


class PaperVenue:
    """The embedded paper broker over ``<SYMBOL>.csv`` files (or the embedded data), re-read when a file
    changes: a file that grows a bar at a time is traded a bar at a time."""

    def __init__(self, syms: tuple[str, ...], state_dir: Path, data_dir: Path | None, fee: float | None,
                 clock: Callable[[], pd.Timestamp], on_duplicate: str = "error", market: Market = Market(),
                 hold: bool = False) -> None:
        from marketcast.trade.loop.feed import history_feed
        from marketcast.trade.venues.paper import PaperBroker, written_mode

        self.syms, self.data_dir, self.now, self.on_duplicate = syms, data_dir, clock, on_duplicate
        self.market = market
        self.raw: dict[str, tuple[object, Bars]] = {}
        self.read: dict[str, Bars] = {}  # each file as read, before the market check (history)
        self.bars: dict[str, Bars] = {}  # cut at the clock; shared with the broker and the feed
        self._load(self.now())
        last = min(b.frame.index[-1] for b in self.bars.values())
        # A new folder gets the broker that holds as Alpaca does (positions overnight, a close queued to the next
        # open), so that `trade run` on paper trades what the backtest scores and a replay sends; a folder is
        # opened as its broker was written (one from before the modes, or a bar-settling one, stays so).
        written = written_mode(state_dir / "broker.db")
        hold = hold or written == "hold" or (written is None and not (state_dir / "broker.db").exists())
        self.broker = PaperBroker(state_dir / "broker.db", self.bars, fee=fee, start=last, hold=hold)
        self.feed = history_feed(self.bars, lambda: self.broker.clock)
        self.asset_classes = {s: b.asset_class for s, b in self.bars.items()}

    def _load(self, now) -> None:
        from marketcast.data import load_symbol
        from marketcast.data.load import find_symbol_file

        for s in self.syms:
            stamp = None
            if self.data_dir is not None:
                info = find_symbol_file(self.data_dir, s).stat()
                stamp = (info.st_mtime_ns, info.st_size)
            if s not in self.raw or self.raw[s][0] != stamp:  # the market check and calendar filter of replays
                loaded = load_symbol(s, self.data_dir, on_duplicate=self.on_duplicate,
                                     asset_class=self.market.asset_classes.get(s.upper()),
                                     periods_per_year=self.market.periods_per_year)
                self.raw[s], self.read[s] = (stamp, tradable({s: loaded})[s]), loaded
            self.bars[s] = self.raw[s][1] if now is None else complete(self.raw[s][1], now)

    def refresh(self, now) -> str:
        """Re-read changed files, settle the bars the broker has not seen; the newest bar of the data."""
        self._load(now)
        self.broker.set_bars(self.bars)
        latest = max(b.frame.index[-1] for b in self.bars.values())
        self.broker.advance_to(latest)
        return latest.isoformat()

    def history(self, symbol: str) -> Bars:
        """The symbol's whole file as read: what tuned weights' record fingerprints (the same bars under
        another name are matched by it, :mod:`marketcast.forecast.exposure`)."""
        return self.read[symbol]


class AlpacaVenue:
    """Alpaca on the host the flags chose; its clock is Alpaca's (``GET /v2/clock``). A symbol's bars are
    requested again only when its calendar says a newer bar is complete than the ones held, so a look every
    minute costs one clock request, not one bars request per symbol (Alpaca allows 200 requests a minute)."""

    def __init__(self, syms: tuple[str, ...], live: bool, market: Market = Market()) -> None:
        from marketcast.data import infer_asset_class
        from marketcast.trade.loop.feed import broker_feed
        from marketcast.trade.venues.alpaca import AlpacaBroker

        self.syms = syms
        self.asset_classes = {s: market.asset_classes.get(s.upper()) or infer_asset_class(s) for s in syms}
        self.broker = AlpacaBroker.from_env(live=live, asset_classes=self.asset_classes)
        self._fetch = broker_feed(self.broker, self.asset_classes, periods_per_year=market.periods_per_year)
        self.held: dict[str, Bars] = {}  # as the broker served them
        self.bars: dict[str, Bars] = {}  # cut at the clock

    def now(self) -> pd.Timestamp:
        return pd.Timestamp(self.broker.market_clock().now).tz_convert("UTC")

    def refresh(self, now) -> str:
        for s in self.syms:
            if s not in self.held or newer_bar_due(self.held[s], now):
                self.held[s] = self._fetch(s)
            self.bars[s] = complete(self.held[s], now)
        return max(b.frame.index[-1] for b in self.bars.values()).isoformat()

    def feed(self, symbol: str) -> Bars:
        return self.bars[symbol]

    def history(self, symbol: str) -> None:
        """None: the broker serves only its latest bars, so no fingerprint of a tuning period can be taken."""
        return None


def check_markets(venue) -> None:
    """Before any order: every symbol is of an asset class the loop can trade
    (:func:`marketcast.trade.risk.markets.refuse_untraded`) and the broker lists it as that class and tradable (Alpaca:
    ``GET /v2/assets/{symbol}``, https://docs.alpaca.markets/reference/get-v2-assets-symbol_or_asset_id); else
    one line, exit 2."""
    refuse_untraded(venue.asset_classes)
    for s, c in venue.asset_classes.items():
        asset = venue.broker.asset(s)
        if asset.asset_class != c:
            raise ConfigError(f"trade.symbols: {s} is {c} by its data but the broker lists it as {asset.asset_class}; "
                              f"check the symbol")
        if not asset.tradable:
            raise ConfigError(f"trade.symbols: the broker lists {s} as not tradable; drop it from the symbols")


def system_clock() -> pd.Timestamp:
    return pd.Timestamp.now(tz="UTC")


def file_clock(path: Path) -> Callable[[], pd.Timestamp]:
    """A clock read from ``path`` (one ISO time) at every look: simulated time for a paper loop."""

    def now() -> pd.Timestamp:
        try:
            t = pd.Timestamp(read_text(path).strip())  # a FIFO there: one line, not a hang
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--clock-file {path}: {getattr(exc, 'strerror', None) or exc}; write one ISO time "
                              f"into it, e.g. 2018-07-20T21:00:00Z") from None
        return t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")

    return now


def open_venue(broker_name: str, live: bool, syms: tuple[str, ...], state_dir: Path, data_dir: Path | None,
               fee: float | None, clock_file: Path | None = None, on_duplicate: str = "error",
               market: Market | None = None, hold: bool = False):
    """The embedded paper broker over ``data_dir`` bars (its clock the system's or ``clock_file``), or Alpaca
    on the host ``live`` selects (checked against ``APCA_API_BASE_URL`` before any request). ``hold``: the
    loop holds positions across decisions, so the paper broker must hold as Alpaca does."""
    market = market or Market()
    if broker_name == "paper":
        clock = system_clock if clock_file is None else file_clock(clock_file)
        return PaperVenue(syms, state_dir, data_dir, fee, clock, on_duplicate, market, hold)
    if clock_file is not None:
        raise ConfigError("--clock-file drives the paper broker only; Alpaca's clock is Alpaca's")
    return AlpacaVenue(syms, live, market)


def resolve_command(state_dir: Path, broker_name: str, live: bool, syms: tuple[str, ...],
                    data_dir: Path | None) -> str:
    """The ``trade reconcile --accept-broker`` command for the same state and broker as this run."""
    parts = ["marketcast trade reconcile --accept-broker", f"--state-dir {state_dir}", f"--symbols {','.join(syms)}"]
    if broker_name == "alpaca":
        parts.append("--broker alpaca" + (" --live --i-understand-live-trading" if live else ""))
    elif data_dir is not None:
        parts.append(f"--data-dir {data_dir}")
    return " ".join(parts)
