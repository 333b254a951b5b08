"""``data fetch``: bars from a source into ``OUT_DIR/<SYMBOL>.csv``, checked like a user's own file.

Sources (docs/usage.md#fetching-bars has the table: keys, bar sizes, depth, adjustments, limits, terms):

=================  =========  ==========================================================================
``--source``       extra      what
=================  =========  ==========================================================================
``alpaca``         alpaca     Alpaca's market data (keys); :mod:`marketcast.data.fetch`
``yahoo``          yahoo      Yahoo Finance through yfinance, no keys; :mod:`marketcast.data.yahoo`
``ccxt:EXCHANGE``  crypto     a crypto exchange's public OHLCV through ccxt; :mod:`marketcast.data.exchange`
=================  =========  ==========================================================================

Order of work: every option, the output folder and the files already there are checked before the first network
call; then every symbol is fetched; each frame is cleaned (bars without any price dropped, a timestamp served
twice kept once: the *repaired* rows), validated by :func:`marketcast.data.validate.check_bars`, its asset class
read from the bar times (:func:`marketcast.data.detect.resolve_asset_class`) and its missing bars counted against
the class's calendar; only when every symbol passed are the files written, all or nothing.

Incremental: where ``<SYMBOL>.csv`` exists, the fetch starts :data:`OVERLAP` bars before its last bar; those bars
must agree with the file (prices within a relative 1e-6; the file's last bar is replaced, as it may have been a
bar still forming), else one line and exit 2. A sidecar ``<SYMBOL>.csv.json`` records source, timeframe and the
adjustment the prices carry; a fetch with another source or adjustment into the same file is refused.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from marketcast.data.detect import resolve_asset_class
from marketcast.data.load import load_bars
from marketcast.data.spacing import infer_interval, ns_array
from marketcast.data.symbols import check_symbol
from marketcast.data.validate import PRICE_COLUMNS, check_bars
from marketcast.errors import ConfigError, DataError
from marketcast.fileio import check_writable, write_files

SOURCES = {"alpaca": "alpaca", "yahoo": "yahoo", "ccxt:EXCHANGE": "crypto"}  # --source -> its extra
FORMATS = ("csv", "parquet")
#: adjustments each source can serve, the default first (ccxt: crypto has no corporate actions)
#: Alpaca's stock feeds (alpaca-py ``DataFeed``; https://docs.alpaca.markets/reference/stockbars, ``feed``)
FEEDS = ("iex", "sip", "delayed_sip", "otc", "boats", "overnight")
ADJUSTMENTS = {"alpaca": ("all", "split", "dividend", "raw"), "yahoo": ("all", "split"), "ccxt": ("none",)}
MIRROR_VAR = "MARKETCAST_FETCH_URL"  # yahoo and ccxt requests go to this host instead (a mirror; the tests)
RETRY_DELAYS = (2.0, 8.0, 30.0)  # seconds before each retry of a rate-limited request
OVERLAP = 5  # bars before an existing file's last one fetched again and compared
_TIMEFRAME = re.compile(r"^(\d+)(Min|Hour|Day|Week|Month)$", re.IGNORECASE)
_UNITS = ("Min", "Hour", "Day", "Week", "Month")


def parse_source(text: str) -> tuple[str, str | None]:
    """``alpaca``, ``yahoo``, ``ccxt:binance`` -> ``(kind, exchange)``."""
    kind, _, exchange = text.strip().partition(":")
    kind = kind.lower()
    if kind in ("alpaca", "yahoo") and not exchange:
        return kind, None
    if kind == "ccxt" and re.fullmatch(r"[a-z0-9_]+", exchange.lower()):
        return kind, exchange.lower()
    raise ConfigError(f"--source {text!r}: use alpaca, yahoo or ccxt:EXCHANGE (e.g. ccxt:binance, ccxt:kraken)")


def timeframe_parts(text: str) -> tuple[int, str]:
    """``1Day`` -> ``(1, 'Day')``; ``15min`` -> ``(15, 'Min')``."""
    match = _TIMEFRAME.match(text.strip())
    if not match or int(match.group(1)) < 1:
        raise ConfigError(f"--timeframe {text!r}: use <N>Min, <N>Hour, 1Day, 1Week or <N>Month (e.g. 1Day, 15Min)")
    return int(match.group(1)), next(u for u in _UNITS if u.lower() == match.group(2).lower())


def with_retries(call: Callable, errors, delays: Sequence[float] | None = None, sleep: Callable = time.sleep):
    """``call()``, again after each of ``delays`` seconds while it raises one of ``errors`` (a rate limit);
    the last failure propagates."""
    delays = RETRY_DELAYS if delays is None else delays
    for delay in delays:
        try:
            return call()
        except errors:
            sleep(delay)
    return call()


def file_stem(symbol: str) -> str:
    """``BTC/USDT`` -> ``BTC-USDT`` (a name the loaders read back as crypto); checked as a file name."""
    return check_symbol(symbol.upper().replace("/", "-"), "symbol")


@dataclass
class Fetched:
    """One symbol's file after the fetch: every bar in it, how many are new, and what the checks found."""

    symbol: str
    path: Path
    frame: pd.DataFrame
    new: int
    asset_class: str
    adjustment: str
    missing: int | None  # bars the calendar expects between the first and last bar that are absent
    repaired: int  # rows dropped: bars without a price, a timestamp served twice
    meta: dict = field(default_factory=dict)


@dataclass(frozen=True)
class FetchRequest:
    symbols: Sequence[str]
    start: datetime
    end: datetime | None  # exclusive; None: now
    timeframe: str = "1Day"
    source: str = "alpaca"
    out_dir: Path = Path("data")
    fmt: str = "csv"
    adjustment: str | None = None
    asset_classes: Mapping[str, str | None] = field(default_factory=dict)
    feed: str | None = None


def adjustment_for(kind: str, asked: str | None) -> str:
    allowed = ADJUSTMENTS[kind]
    if asked is None:
        return allowed[0]
    if asked not in allowed:
        raise ConfigError(f"--adjustment {asked!r}: --source {kind} serves {', '.join(allowed)}")
    return asked


def check_feed(kind: str, feed: str | None) -> None:
    """``--feed`` names one of Alpaca's stock feeds, and only for ``--source alpaca`` (the request model would
    otherwise answer with a pydantic traceback, after the keys were read)."""
    if feed is None:
        return
    if kind != "alpaca":
        raise ConfigError(f"--feed {feed!r}: only --source alpaca has feeds; leave --feed out")
    if feed not in FEEDS:
        raise ConfigError(f"--feed {feed!r}: use one of {', '.join(FEEDS)}")


def _existing(path: Path, meta: dict, asset_class: str | None) -> pd.DataFrame | None:
    """The bars already in ``path`` (validated as any file), refused when its sidecar names another source,
    timeframe or adjustment."""
    if not path.exists():
        return None
    side = Path(f"{path}.json")
    if side.exists():
        try:
            old = json.loads(side.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DataError(f"{side}: cannot be read ({exc}); delete it and {path.name} to fetch anew") from None
        for key in ("source", "timeframe", "adjustment"):
            if str(old.get(key)) != str(meta[key]):
                raise ConfigError(f"{path}: holds {key} {old.get(key)!r} bars, this fetch asks for {meta[key]!r}; "
                                  "use another --out-dir, or delete the file to fetch it anew")
    return load_bars(path, asset_class=asset_class).frame


def _clean(frame: pd.DataFrame, what: str) -> tuple[pd.DataFrame, int]:
    """Drop bars with no price at all (Yahoo serves such rows on days without trades), keep the last of a
    timestamp served twice (pages that overlap), sort by time. Returns the frame and the rows repaired."""
    if frame.empty:
        raise DataError(f"{what}: no bars in the range; check the symbol, --start and --end")
    missing = [c for c in PRICE_COLUMNS if c not in frame.columns]
    if missing:
        raise DataError(f"{what}: the reply has no {', '.join(missing)} column")
    priced = frame[list(PRICE_COLUMNS)].notna().any(axis=1).to_numpy()
    kept = frame[priced].sort_index(kind="stable")
    kept = kept[~kept.index.duplicated(keep="last")]
    filled = 0
    if "volume" in kept.columns:  # a bar with prices and no volume (Yahoo's forming bar): volume 0, counted
        filled = int(kept["volume"].isna().sum()) if kept["volume"].notna().any() else 0
        kept = kept.assign(volume=kept["volume"].fillna(0.0)) if kept["volume"].notna().any() else \
            kept.drop(columns="volume")
    return kept, len(frame) - len(kept) + filled


def _merge(old: pd.DataFrame | None, new: pd.DataFrame, path: Path) -> tuple[pd.DataFrame, int]:
    """``old`` with ``new``'s bars after it; the overlap (old's bars before its last one) must agree."""
    if old is None:
        return new, len(new)
    last = old.index[-1]
    shared = old.index[:-1].intersection(new.index)
    for col in PRICE_COLUMNS:
        a, b = old.loc[shared, col].to_numpy(), new.loc[shared, col].to_numpy()
        bad = ~np.isclose(a, b, rtol=1e-6, atol=0.0)
        if bad.any():
            i = int(np.argmax(bad))
            raise DataError(f"{path}: the bar at {shared[i]} disagrees with the source ({col} {a[i]:g} in the file, "
                            f"{b[i]:g} now; a split or dividend adjusted history since?); delete the file to fetch "
                            "it anew")
    after = new[new.index >= last]
    merged = pd.concat([old[old.index < last], after[old.columns.intersection(after.columns)]])
    return merged, int((after.index > last).sum())


def missing_bars(index: pd.DatetimeIndex, asset_class: str) -> int | None:
    """Bars absent between the first and the last: daily bars against the class's sessions, intraday bars
    within each session (24/7: over the whole span); None for weekly and longer bars."""
    from marketcast.data.calendar import calendar_for

    t = ns_array(index)
    interval = infer_interval(t)
    if len(t) < 2 or interval.kind not in ("daily", "intraday"):
        return None
    calendar = calendar_for(asset_class)
    try:
        positions = calendar.session_positions(t)
    except DataError:
        return None
    if interval.kind == "daily":
        return int(max(positions[-1] - positions[0] + 1 - len(np.unique(positions)), 0))
    step = interval.step.value
    gaps = np.diff(t)
    inside = positions[1:] == positions[:-1] if calendar.name != "24/7" else np.ones(len(gaps), bool)
    return int(np.maximum(gaps[inside] // step - 1, 0).sum())


def _sources_fetch(kind: str, exchange: str | None, req: FetchRequest, starts: Mapping[str, datetime],
                   adjustment: str) -> dict[str, pd.DataFrame]:
    """Symbol -> raw frame from the source, each from its own start (a file's overlap, else --start)."""
    count, unit = timeframe_parts(req.timeframe)
    mirror = os.environ.get(MIRROR_VAR) or None
    groups: dict[datetime, list[str]] = {}
    for symbol, start in starts.items():
        groups.setdefault(start, []).append(symbol)
    out: dict[str, pd.DataFrame] = {}
    if kind == "alpaca":
        from marketcast.data.fetch import fetch_alpaca

        last = req.end - pd.Timedelta("1us") if req.end is not None else None  # Alpaca's end is inclusive
        for start, names in groups.items():
            out.update(fetch_alpaca(names, start, last, req.timeframe, asset_classes=req.asset_classes,
                                    adjustment=adjustment, feed=req.feed))
        return out
    if kind == "yahoo":
        from marketcast.data.yahoo import fetch_yahoo, yahoo_interval

        for start, names in groups.items():
            out.update(fetch_yahoo(names, start, req.end, yahoo_interval(count, unit), adjustment=adjustment,
                                   mirror=mirror, retry=with_retries))
        return out
    from marketcast.data.exchange import ccxt_timeframe, fetch_ccxt, open_exchange

    venue = open_exchange(exchange, mirror)
    for start, names in groups.items():
        out.update(fetch_ccxt(venue, names, start, req.end, ccxt_timeframe(venue, count, unit), retry=with_retries))
    return out


def check_request(req: FetchRequest) -> tuple[str, str | None, str]:
    """Every option and path, before any network call: ``(kind, exchange, adjustment)``."""
    kind, exchange = parse_source(req.source)
    timeframe_parts(req.timeframe)
    if req.fmt not in FORMATS:
        raise ConfigError(f"--format {req.fmt!r}: use one of {', '.join(FORMATS)}")
    adjustment = adjustment_for(kind, req.adjustment)
    check_feed(kind, req.feed)
    if req.end is not None and req.end <= req.start:
        raise ConfigError(f"--end {req.end - pd.Timedelta('1D'):%Y-%m-%d} is before --start {req.start:%Y-%m-%d}; "
                          "swap them")
    if kind == "yahoo":
        from marketcast.data.yahoo import import_yfinance, yahoo_interval

        import_yfinance()
        yahoo_interval(*timeframe_parts(req.timeframe))
    elif kind == "ccxt":
        from marketcast.data.exchange import import_ccxt

        import_ccxt()
    elif kind == "alpaca":
        from marketcast.data.fetch import alpaca_keys, parse_timeframe

        parse_timeframe(req.timeframe)
        alpaca_keys()
    stems = [file_stem(s) for s in req.symbols]
    if len(set(stems)) < len(stems):
        raise ConfigError(f"symbols {', '.join(req.symbols)}: two of them name the same file; give each once")
    check_writable(req.out_dir, "--out-dir")
    return kind, exchange, adjustment


def download(req: FetchRequest) -> list[Fetched]:
    """Fetch, check and write every symbol of ``req`` (see the module docstring); nothing is written unless all
    passed."""
    kind, exchange, adjustment = check_request(req)
    source = kind if exchange is None else f"{kind}:{exchange}"
    symbols = [s.upper() for s in req.symbols]
    paths = {s: Path(req.out_dir) / f"{file_stem(s)}.{req.fmt}" for s in symbols}
    metas = {s: {"source": source, "symbol": s, "timeframe": req.timeframe, "adjustment": adjustment}
             for s in symbols}
    override = {s: req.asset_classes.get(s.upper()) for s in symbols}
    old = {s: _existing(paths[s], metas[s], override[s]) for s in symbols}
    starts = {s: req.start if old[s] is None else old[s].index[max(len(old[s]) - 1 - OVERLAP, 0)]
              .tz_convert(None).to_pydatetime() for s in symbols}
    raw = _sources_fetch(kind, exchange, req, starts, adjustment)
    done: list[Fetched] = []
    for s in symbols:
        what = f"{source} {s}"
        frame, repaired = _clean(raw.get(s, pd.DataFrame()), what)
        check_bars(frame, what)
        merged, new = _merge(old[s], frame, paths[s])
        check_bars(merged, str(paths[s]))
        cls, _ = resolve_asset_class(file_stem(s), merged.index, override[s], where=str(paths[s]))
        adjusted = "none" if cls == "crypto" and kind == "alpaca" else adjustment
        meta = {**metas[s], "adjustment": adjustment, "adjusted_for": ADJUSTED_FOR[adjusted],
                "asset_class": cls, "rows": len(merged), "first": str(merged.index[0]), "last": str(merged.index[-1])}
        done.append(Fetched(s, paths[s], merged, new, cls, adjusted, missing_bars(merged.index, cls), repaired, meta))
    files: dict[str, object] = {}
    for f in done:
        files[f.path.name] = f.frame.to_csv if req.fmt == "csv" else f.frame.to_parquet
        files[f"{f.path.name}.json"] = json.dumps(f.meta, indent=2) + "\n"
    write_files(req.out_dir, files, DataError)
    return done


#: what each adjustment means, written into the sidecar
ADJUSTED_FOR = {
    "all": "splits and dividends (total return: prices scaled back by every later split and dividend)",
    "split": "splits only (dividends not taken out)",
    "dividend": "dividends only",
    "raw": "nothing (prices as traded)",
    "none": "nothing (no corporate actions)",
}

