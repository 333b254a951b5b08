"""What a trade command sets up before its first cycle: the log, the planner, the broker the flags ask for."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from marketcast.errors import StateError


class StateLogHandler(logging.FileHandler):
    """``trade.log``: a record that cannot be written (a full disk) ends the run with one
    :class:`StateError` line instead of logging's traceback on stderr."""

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        exc = sys.exc_info()[1]
        raise StateError(f"{self.baseFilename}: {getattr(exc, 'strerror', None) or exc}; free disk space and run "
                         f"again") from None


def setup_logging(state_dir: Path | None, verbose: bool) -> None:
    """stderr, plus ``state_dir/trade.log`` unless ``state_dir`` is None (a dry run writes no file)."""
    from marketcast.trade.redact import RedactingFilter

    logger = logging.getLogger("marketcast")
    logger.setLevel(logging.INFO)
    for h in list(logger.handlers):
        if getattr(h, "_marketcast_trade", False):
            logger.removeHandler(h)
            h.close()
    stream = logging.StreamHandler()
    stream.setLevel(logging.INFO if verbose else logging.WARNING)
    handlers: list[logging.Handler] = [stream]
    if state_dir is not None:
        state_dir.mkdir(parents=True, exist_ok=True)
        try:
            handlers.append(StateLogHandler(state_dir / "trade.log", encoding="utf-8"))
        except OSError as exc:
            raise StateError(f"{state_dir / 'trade.log'}: {exc.strerror}; check permissions and free space") from None
    for h in handlers:
        h._marketcast_trade = True
        h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        h.addFilter(RedactingFilter())
        logger.addHandler(h)


def planner(model: str, seed: int, weights: str | None = None, device: str = "cpu"):
    from dataclasses import replace

    from marketcast.forecast import load_forecaster
    from marketcast.trade.planner import PLANNER_CONFIG, BacktestPlanner

    forecaster = load_forecaster(model, weights=weights, device=device, seed=seed)
    return BacktestPlanner(forecaster, replace(PLANNER_CONFIG, seed=seed))


@dataclass
class Venue:
    """A broker with its bar feed and clock (the decision bar each cycle acts on)."""

    broker: object
    feed: Callable
    asset_classes: dict[str, str]
    clock: Callable[[], str]


def open_venue(broker_name: str, live: bool, syms: tuple[str, ...], state_dir: Path, data_dir: Path | None,
               fee: float | None) -> Venue:
    """The embedded paper broker over ``data_dir`` bars, or Alpaca on the host ``live`` selects (checked
    against ``APCA_API_BASE_URL`` before any request)."""
    if broker_name == "paper":
        from marketcast.data import load_symbol
        from marketcast.trade.feed import history_feed
        from marketcast.trade.paper import PaperBroker

        bars = {s: load_symbol(s, data_dir) for s in syms}
        last = min(b.frame.index[-1] for b in bars.values())
        broker = PaperBroker(state_dir / "broker.db", bars, fee=fee, start=last)
        end = max(b.frame.index[-1] for b in bars.values())
        return Venue(broker, history_feed(bars, lambda: broker.clock), {s: b.asset_class for s, b in bars.items()},
                     lambda: (broker.advance_to(end), broker.clock)[1])
    from marketcast.data import infer_asset_class
    from marketcast.trade.alpaca import AlpacaBroker
    from marketcast.trade.feed import broker_feed

    classes = {s: infer_asset_class(s) for s in syms}
    broker = AlpacaBroker.from_env(live=live, asset_classes=classes)
    feed = broker_feed(broker, classes)
    return Venue(broker, feed, classes, lambda: max(feed(s).frame.index[-1] for s in syms).isoformat())


def resolve_command(state_dir: Path, broker_name: str, live: bool, syms: tuple[str, ...],
                    data_dir: Path | None) -> str:
    """The ``trade reconcile --accept-broker`` command for the same state and broker as this run."""
    parts = ["marketcast trade reconcile --accept-broker", f"--state-dir {state_dir}", f"--symbols {','.join(syms)}"]
    if broker_name == "alpaca":
        parts.append("--broker alpaca" + (" --live --i-understand-live-trading" if live else ""))
    elif data_dir is not None:
        parts.append(f"--data-dir {data_dir}")
    return " ".join(parts)
