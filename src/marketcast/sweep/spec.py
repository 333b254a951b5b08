"""The sweep spec (TOML): which symbols, which fixed options, which axes; expanded into cells.

::

    name = "fills"                      # optional: the run id starts with it (default: the file's stem)

    [data]
    symbols = ["SP500", "NASDAQ"]       # the embedded bars, or files in dir (default: every file in dir)
    start = "2015-01-02"                # optional: the windows whose decision bar falls in start..end
    end = "2016-12-30"                  #   (ISO dates, inclusive; an alternative to windows)
    dir = "bars"                        # <SYMBOL>.csv / .parquet, relative to this file
    asset_class = "stock"               # optional override (default: from the bar times, the name breaks a tie)
    periods_per_year = 252              # optional: periods per year for annualising (default: the calendar's)
    on_duplicate = "error"              # a repeated timestamp: error (default), first or last
    timezone = "America/New_York"       # optional: the zone of times written without one (default: UTC)

    [options]                           # every cell: backtest settings and model options
    windows = 70                        # or "all": every window each symbol's history allows
    num_samples = 256
    exit = "close"                      # the execution rule (backtest --exit): close or next-open
    hold = false                        # backtest --hold: the pick held while its decision agrees

    [grid]                              # axes: lists of values; the cells are their product
    model = ["baseline", "toto"]
    fill_mode = ["touch", "penetrate"]
    seed = [0, 1]

    [[settings]]                        # an axis of named bundles, e.g. strategy settings
    name = "narrow"
    ci_band = [0.45, 0.55]

    [models.toto]                       # options for the cells of one model
    weights = "Datadog/Toto-Open-Base-1.0"
    device = "cuda"
    compile = "reduce-overhead"

    [ray]                               # how to run, not what: not part of the spec's hash
    actors = 1                          # forecast actors per model (default: 1 on CPU, one per GPU on cuda)
    whole_jobs = false                  # never load+forecast+settle whole jobs in one task (default: when cheap)

Option names are :class:`BacktestConfig`'s fields and the model options (``model``, ``weights``,
``device``, ``dtype``, ``compile``); a key set in two places is an error. Every grid point is built into
its :class:`BacktestConfig` by :func:`load_spec`, so a value it refuses (``windows = 0``, a negative cost, a
negative ``seed``) is one line before Ray starts. Symbols must be names (:func:`check_symbol`: no path, no
``..``), so no file outside the data folder is read. Data problems are not spec errors: a symbol without a
file fails its cells and the rest go on.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import types
import typing
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.context import needed
from marketcast.backtest.period import ALL, Period, parse_day, windows_of
from marketcast.data.asset import check_asset_class
from marketcast.data.bars import Bars
from marketcast.data.embedded import EMBEDDED
from marketcast.data.load import ON_DUPLICATE, symbol_files
from marketcast.data.symbols import check_symbol
from marketcast.data.zones import check_timezone
from marketcast.console import err_console
from marketcast.errors import ConfigError, DataError, MarketcastError
from marketcast.forecast.registry import MODEL_NAMES, check_installed
from marketcast.runs.cells import MODEL_OPTIONS, Cell, digest
from marketcast.runtime.compile_settings import MODES
from marketcast.settings import read_toml

MODEL_TYPES = {"model": str, "weights": str | None, "device": str, "dtype": str, "compile": str | None}
RAY_KEYS = {"actors": int, "max_in_flight": int, "flush_cells": int, "flush_seconds": float, "cells_per_task": int,
            "symbols_per_call": int, "fold_parts": int, "whole_jobs": bool}
#: A sweep's name becomes part of its run id and folder names; a file name may hold 255 bytes.
MAX_NAME = 100
TOP_KEYS = ("name", "data", "options", "grid", "settings", "models", "ray")


@functools.cache
def option_types() -> dict[str, object]:
    """Option name -> type: every BacktestConfig field (read from the class) and the model options; read once
    (``get_type_hints`` per grid value made a 10,000-value axis take 17 s to check)."""
    hints = typing.get_type_hints(BacktestConfig)
    return {**MODEL_TYPES, **{f.name: hints[f.name] for f in dataclasses.fields(BacktestConfig)}}


def _fits(value, hint) -> bool:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin is tuple:
        args = typing.get_args(hint)
        inner = args[0] if args else object
        return isinstance(value, (list, tuple)) and all(_fits(v, inner) for v in value)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint) if isinstance(hint, type) else True


def _name(hint) -> str:
    """``int``, ``float or None``, ``list of float``: a type as a spec's author reads it."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_name(h) for h in args)
    if typing.get_origin(hint) is tuple:
        return f"list of {_name(args[0]) if args else 'values'}"
    return "None" if hint is type(None) else getattr(hint, "__name__", str(hint))


def _option(where: str, key: str, value):
    types_ = option_types()
    if key == "windows" and value == ALL:  # every window the history allows, counted per symbol
        return ALL
    if key not in types_:
        raise ConfigError(f"{where}: unknown option {key!r}; options are {', '.join(types_)}")
    if not _fits(value, types_[key]):
        raise ConfigError(f"{where}: {key} = {value!r} is not {_name(types_[key])}")
    if key == "compile" and value not in (None, "eager", *MODES):
        raise ConfigError(f"{where}: compile = {value!r}; use eager or one of {', '.join(MODES)}")
    if key == "seed" and value < 0:  # numpy's generators refuse a negative seed (np.random.default_rng(-1))
        raise ConfigError(f"{where}: seed = {value!r}; a seed is an integer >= 0")
    if key == "model" and value not in MODEL_NAMES:
        raise ConfigError(f"{where}: model = {value!r}; use one of {', '.join(MODEL_NAMES)}")
    if key == "model":  # an adapter without its extra: said before any cell runs, not in every cell
        check_installed([value])
    return tuple(value) if isinstance(value, list) else value


def _table(raw: dict, key: str, where: str) -> dict:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: [{key}] must be a table")
    return value


@dataclass(frozen=True)
class Spec:
    """A parsed spec; :meth:`cells` expands it."""

    path: Path
    name: str
    symbols: tuple[str, ...]
    data_dir: Path | None
    asset_class: str | None
    on_duplicate: str
    options: dict
    grid: dict[str, list]
    settings: list[dict]
    models: dict[str, dict]
    ray: dict = field(default_factory=dict)
    periods_per_year: float | None = None
    symbol_classes: tuple[tuple[str, str], ...] = ()  # the command line's --asset-class, per symbol
    start: date | None = None  # [data] start / end: the period's decision dates (marketcast.backtest.period)
    end: date | None = None
    timezone: str | None = None  # [data] timezone / --timezone: the zone of naive bar times (None: UTC)

    @property
    def spec_hash(self) -> str:
        """What decides the results (not [ray]): a resumed run must have the same."""
        return digest({"symbols": self.symbols, "data_dir": self.data_dir, "asset_class": self.asset_class,
                       "on_duplicate": self.on_duplicate,
                       "options": self.options, "grid": self.grid, "settings": self.settings,
                       "models": self.models,
                       **({} if self.periods_per_year is None else {"periods_per_year": self.periods_per_year}),
                       **({"symbol_classes": self.symbol_classes} if self.symbol_classes else {}),
                       **{k: str(v) for k, v in (("start", self.start), ("end", self.end)) if v is not None},
                       **({} if self.timezone is None else {"timezone": self.timezone})})

    def symbol_paths(self) -> dict[str, Path | None]:
        """Symbol -> its file (None = embedded). A symbol without a file maps to the file it would need."""
        if self.data_dir is None:
            return dict.fromkeys(self.symbols)
        files = symbol_files(self.data_dir)
        return {s: files.get(s, self.data_dir / f"{check_symbol(s)}.csv") for s in self.symbols}

    def cells(self) -> list[Cell]:
        """Every grid point (axes in the order written, then the settings bundles) x every symbol."""
        axes = [[(k, v) for v in values] for k, values in self.grid.items()]
        bundles = self.settings or [{}]
        out = []
        total = math.prod(len(a) for a in axes)
        report = total >= _PROGRESS_FROM
        for done, point in enumerate(itertools.product(*axes)):
            if report and done % (total // 10) == 0:
                err_console.print(f"planning {self.name}: {done:,} of {total:,} grid points checked", highlight=False)
            for bundle in bundles:
                chosen = {**self.options, **dict(point), **{k: v for k, v in bundle.items() if k != "name"}}
                chosen = {**chosen, **self.models.get(chosen.get("model", "baseline"), {})}
                model = {k: chosen.pop(k) for k in MODEL_OPTIONS if k in chosen}
                dated = chosen.get("windows") == ALL or self.start is not None or self.end is not None
                data_dir = None if self.data_dir is None else str(self.data_dir)
                paths = self.symbol_paths() if dated else {}
                for s in self.symbols:
                    asset_class = dict(self.symbol_classes).get(s, self.asset_class)
                    if dated or s == self.symbols[0]:  # a window count from the data is one per symbol
                        windows = self._windows(s, paths.get(s), asset_class, model.get("model", "baseline"),
                                                chosen)
                        try:
                            config = BacktestConfig(**{**chosen, **windows})
                        except MarketcastError as exc:
                            raise ConfigError(f"{self.path}: grid point {_describe(point, bundle)}: {exc}") from None
                    out.append(Cell(symbol=s, config=config, asset_class=asset_class, data_dir=data_dir,
                                    on_duplicate=self.on_duplicate, periods_per_year=self.periods_per_year,
                                    end=None if self.end is None else self.end.isoformat(),
                                    timezone=self.timezone, **model))
        if len({c.cell_id for c in out}) != len(out):
            raise ConfigError(f"{self.path}: two grid points give the same cells (settings bundles or axis values "
                              "that repeat); remove the repeat")
        self.guard_tuned(out)
        return out

    def guard_tuned(self, cells: list[Cell]) -> None:
        """Refuse (one line, exit 2, before any cell runs) a cell whose tuned weights (a ``tuning.json``) would
        be scored on a window on or before their ``until`` on a tuned symbol: the check ``backtest`` makes
        (:func:`marketcast.forecast.tuning.guard_windows`). A sweep has no --allow-in-sample."""
        from marketcast.backtest.prepare import prepare
        from marketcast.forecast.tuning import read_tuning

        paths, tunings = None, {}
        for cell in cells:
            if cell.weights not in tunings:
                tunings[cell.weights] = read_tuning(cell.weights)
            tuning = tunings[cell.weights]
            if tuning is None:  # every symbol of tuned weights: the same bars may come under another name
                continue
            paths = paths if paths is not None else self.symbol_paths()
            try:
                prepare([self._bars(cell.symbol, paths.get(cell.symbol), cell.asset_class)],
                        Period.last(cell.config.windows, cell.end), cell.config,
                        weights=cell.weights, fix='test after it ([data] start = "{start}")')
            except DataError:  # bars that cannot be used fail their cells when the sweep loads them
                continue
            except ConfigError as exc:
                raise ConfigError(f"{self.path}: {exc}") from None


    def _windows(self, symbol: str, path: Path | None, asset_class: str | None, model: str, chosen: dict) -> dict:
        """``{"windows": N}`` for ``windows = "all"`` or a [data] start/end, from the symbol's bars (read once
        per process and file version); ``{}`` otherwise. Bars that cannot be read keep the default count: their
        cells fail with the reason when the sweep loads them (data problems are not spec errors); a period
        without a window is a spec error."""
        if chosen.get("windows") != ALL and self.start is None and self.end is None:
            return {}
        period = Period(None, self.start, self.end) if self.start or self.end else Period(ALL)
        try:
            return {"windows": windows_of(self._bars(symbol, path, asset_class), period,
                                          _needed(chosen.get("min_context"), model))[1]}
        except DataError as exc:
            if "no window has its decision bar" in str(exc) or "hold no window" in str(exc):
                what = "[data] start/end" if self.start or self.end else 'windows = "all"'
                raise ConfigError(f"{self.path}: {what}: {exc}") from None
            return {"windows": BacktestConfig.windows}


    def _bars(self, symbol: str, path: Path | None, asset_class: str | None) -> Bars:
        """The symbol's bars as the sweep's tasks read them (:func:`marketcast.sweep.tasks.load`), read once per
        process and file version."""
        from marketcast.data import load_bars, load_symbol

        version = path.stat().st_mtime_ns if path is not None and path.is_file() else None
        read = {"asset_class": asset_class, "on_duplicate": self.on_duplicate,
                "periods_per_year": self.periods_per_year, "timezone": self.timezone}
        key = (symbol, path, version, *read.values())
        if key not in _BARS:
            _BARS[key] = (load_bars(path, symbol=symbol, **read) if path is not None and path.is_file() else
                          load_symbol(symbol, data_dir=None if path is None else path.parent, **read))
        return _BARS[key]


_BARS: dict[tuple, Bars] = {}  # a spec's cells are expanded more than once (checked, then planned)


def _min_context(model: str) -> int:
    """Real bars the model's first window needs: the baseline's own minimum, 2 for the others (the sweep's
    :func:`~marketcast.backtest.engine.decision_ends`)."""
    if model == "baseline":
        from marketcast.forecast.baseline import BaselineForecaster

        return BaselineForecaster.min_context
    return 2


def _zone(name, where: str) -> str | None:
    """[data] timezone (or --timezone): an IANA zone name, or None for UTC."""
    if name is not None and not isinstance(name, str):
        raise ConfigError(f"{where}: [data] timezone = {name!r}; give an IANA zone name such as America/New_York")
    try:
        return check_timezone(name)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _needed(asked, model: str) -> int:
    """Real bars a cell's first window holds: its ``min_context`` (the backtest's rule,
    :func:`marketcast.backtest.context.needed`), else the model's; a bad value is left to the cell's
    :class:`BacktestConfig`, which refuses it in one line naming the grid point."""
    try:
        return needed(asked, _min_context(model))
    except (ConfigError, TypeError):
        return _min_context(model)


def _describe(point, bundle: dict) -> str:
    parts = [f"{k}={v}" for k, v in point] + ([f"settings {bundle['name']!r}"] if "name" in bundle else [])
    return ", ".join(parts) or "(the fixed options)"


def _symbols(raw: dict, where: str, base: Path, data_dir_override: Path | None) -> tuple:
    data = _table(raw, "data", where)
    unknown = set(data) - {"symbols", "dir", "asset_class", "on_duplicate", "periods_per_year", "start", "end",
                           "timezone"}
    if unknown:
        raise ConfigError(f"{where}: [data] has unknown keys {', '.join(sorted(unknown))}; use symbols, dir, "
                          "asset_class, on_duplicate, periods_per_year, start, end, timezone")
    if "dir" in data and not isinstance(data["dir"], str):
        raise ConfigError(f"{where}: [data] dir = {data['dir']!r}; give a folder path as a string")
    data_dir = data_dir_override or (base / data["dir"] if "dir" in data else None)
    symbols = data.get("symbols")
    if symbols is not None and (not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols)):
        raise ConfigError(f"{where}: [data] symbols must be a list of strings")
    if symbols is None:
        if data_dir is None:
            raise ConfigError(f"{where}: [data] needs symbols, a dir, or both (or pass --data-dir)")
        symbols = sorted(symbol_files(data_dir))
        if not symbols:
            raise ConfigError(f"{data_dir}: holds no <SYMBOL>.csv or .parquet files")
    else:
        for s in symbols:
            check_symbol(s, f"{where}: [data] symbols:")
    symbols = [s.upper() for s in symbols]
    if not symbols or len(set(symbols)) != len(symbols):
        raise ConfigError(f"{where}: [data] symbols must be a non-empty list without repeats")
    _some_data(symbols, data_dir, where)
    asset_class = data.get("asset_class")
    if asset_class is not None and not isinstance(asset_class, str):
        raise ConfigError(f"{where}: [data] asset_class must be a string")
    if asset_class is not None:
        check_asset_class(asset_class)
    on_duplicate = data.get("on_duplicate", "error")
    if on_duplicate not in ON_DUPLICATE:
        raise ConfigError(f"{where}: [data] on_duplicate must be one of {', '.join(ON_DUPLICATE)}, got {on_duplicate!r}")
    return tuple(symbols), (None if data_dir is None else data_dir.resolve()), asset_class, on_duplicate


def _listed(names, most: int = 6) -> str:
    names = list(names)
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def _some_data(symbols: list[str], data_dir: Path | None, where: str) -> None:
    """A grid none of whose symbols has bars is refused before any cell: it used to run every cell (20,000 of
    them) to record each one's "no data" and exit 1. A grid with some symbols missing runs, and records those
    cells as failed, as before."""
    available = set(EMBEDDED) if data_dir is None else set(symbol_files(data_dir))
    if available & set(symbols):
        return
    if data_dir is None:
        raise ConfigError(f"{where}: no embedded data for any of its symbols ({_listed(symbols)}); embedded "
                          f"symbols are {', '.join(EMBEDDED)} (set [data] dir or --data-dir for others)")
    raise ConfigError(f"{data_dir}: holds none of {where}'s symbols ({_listed(symbols)}); it has "
                      f"{_listed(sorted(available)) or 'no <SYMBOL>.csv or .parquet file'}")


def _check_ints(node, where: str, key: str = "") -> None:
    """TOML's integers are 64-bit (toml.io/en/v1.0.0#integer); Python's reader takes any size, which the run
    store's columns cannot hold."""
    if isinstance(node, dict):
        for k, v in node.items():
            _check_ints(v, where, f"{key}.{k}" if key else str(k))
    elif isinstance(node, list):
        for v in node:
            _check_ints(v, where, key)
    elif isinstance(node, int) and not isinstance(node, bool) and not -2**63 <= node < 2**63:
        raise ConfigError(f"{where}: {key} = {node} is beyond a 64-bit integer (TOML's range); give a smaller number")


def _periods(value, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ConfigError(f"{where}: [data] periods_per_year = {value!r}; give a positive number")
    return float(value)


def _period(data: dict, where: str, places: dict[str, set]) -> tuple[date | None, date | None]:
    """[data] start / end as dates: not with ``windows`` set anywhere, and the end not before the start."""
    found = {}
    for key in ("start", "end"):
        value = data.get(key)
        if value is not None and not isinstance(value, (str, date)) or isinstance(value, datetime):
            raise ConfigError(f"{where}: [data] {key} = {value!r}; give a date as \"YYYY-MM-DD\"")
        found[key] = None if value is None else parse_day(value, f"{where}: [data] {key}")
    start, end = found["start"], found["end"]
    if (start or end) and any("windows" in keys for keys in places.values()):
        raise ConfigError(f"{where}: [data] start/end and windows pick the windows two ways; keep one")
    if start and end and end < start:
        raise ConfigError(f"{where}: [data] end {end} is before start {start}; swap them")
    return start, end


MAX_CELLS = 100_000  # --max-cells: a bigger grid is refused from its axes' lengths before any cell is built
_PROGRESS_FROM = 10_000  # grid points from which planning reports its progress on stderr


def _repeat(values: list):
    """The first value that repeats in one axis (values compared as the cells would be), or None."""
    seen = set()
    for value in values:
        key = repr(value)
        if key in seen:
            return value
        seen.add(key)
    return None


def count_cells(grid: dict[str, list], settings: list, symbols: tuple) -> int:
    """The cells a spec expands to: the product of the axes' lengths x the settings bundles x the symbols."""
    return math.prod(len(v) for v in grid.values()) * max(1, len(settings)) * len(symbols)


def _check_size(where: str, grid: dict[str, list], settings: list, symbols: tuple, max_cells: int) -> int:
    """Refuse a repeated axis value and a grid over ``max_cells``, from the axes alone (a million-cell spec used
    to print nothing for two minutes before its first line)."""
    for key, values in grid.items():
        if (value := _repeat(values)) is not None:
            raise ConfigError(f"{where}: [grid] {key} lists {value!r} twice; remove the repeat")
    count = count_cells(grid, settings, symbols)
    if count > max_cells:
        sizes = " x ".join([*(f"{len(v):,} {k}" for k, v in grid.items()),
                            *([f"{len(settings)} settings"] if settings else []), f"{len(symbols)} symbols"])
        raise ConfigError(f"{where}: the grid has {count:,} cells ({sizes}), more than --max-cells {max_cells:,}; "
                          f"shrink an axis or pass --max-cells {count}")
    return count


def load_spec(path: str | Path, data_dir: str | Path | None = None, asset_class_override: list[str] | None = None,
              periods_per_year: float | None = None, max_cells: int = MAX_CELLS, timezone: str | None = None) -> Spec:
    """Read and check a spec; every problem is one :class:`ConfigError` line naming the file and the key.
    ``asset_class_override`` (``--asset-class`` values: CLASS or SYMBOL=CLASS) and ``periods_per_year`` replace
    the spec's [data] asset_class and periods_per_year, ``timezone`` (``--timezone``) its [data] timezone; a grid
    of more than ``max_cells`` cells is refused."""
    if isinstance(max_cells, bool) or not isinstance(max_cells, int) or max_cells < 1:
        raise ConfigError(f"--max-cells must be a whole number >= 1, got {max_cells!r}")
    path = Path(path)
    raw = read_toml(path, "a sweep spec (a TOML file)")
    where = str(path)
    _check_ints(raw, where)
    unknown = set(raw) - set(TOP_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown keys {', '.join(sorted(unknown))}; a spec has {', '.join(TOP_KEYS)}")
    symbols, folder, asset_class, on_duplicate = _symbols(raw, where, path.parent, Path(data_dir) if data_dir else None)
    options = {k: _option(f"{where} [options]", k, v) for k, v in _table(raw, "options", where).items()}
    grid = {}
    for key, values in _table(raw, "grid", where).items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}: [grid] {key} must be a non-empty list of values")
        grid[key] = [_option(f"{where} [grid]", key, v) for v in values]
    settings = raw.get("settings", [])
    if not isinstance(settings, list) or not all(isinstance(b, dict) for b in settings):
        raise ConfigError(f"{where}: settings must be an array of tables ([[settings]])")
    settings = [{k: (v if k == "name" else _option(f"{where} [[settings]]", k, v)) for k, v in b.items()}
                for b in settings]
    _check_size(where, grid, settings, symbols, max_cells)
    models = {}
    for name, table in _table(raw, "models", where).items():
        if name not in MODEL_NAMES or not isinstance(table, dict):
            raise ConfigError(f"{where}: [models.{name}] must be a table named after a model "
                              f"({', '.join(MODEL_NAMES)})")
        models[name] = {k: _option(f"{where} [models.{name}]", k, v) for k, v in table.items() if k != "model"}
    varied = set(grid) | (set().union(*settings) - {"name"})
    places = {"[options]": set(options), "[grid]": set(grid), "[[settings]]": set().union(*settings) - {"name"},
              "[models.*]": set().union(*models.values()) & varied}
    for (a, keys_a), (b, keys_b) in itertools.combinations(places.items(), 2):
        twice = keys_a & keys_b
        if twice:
            raise ConfigError(f"{where}: {', '.join(sorted(twice))} set in both {a} and {b}; keep it in one")
    ray = _table(raw, "ray", where)
    for key, value in ray.items():
        if key not in RAY_KEYS or not _fits(value, RAY_KEYS[key]) or (RAY_KEYS[key] is not bool and value <= 0):
            numbers = [k for k, hint in RAY_KEYS.items() if hint is not bool]
            raise ConfigError(f"{where}: [ray] {key} = {value!r}; [ray] takes positive numbers for "
                              f"{', '.join(numbers)}, and true or false for whole_jobs")
    name = raw.get("name", path.stem)
    if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum() or len(name) > MAX_NAME:
        shown = repr(name) if len(repr(name)) <= 60 else f"{repr(name)[:50]}... ({len(str(name)):,} characters)"
        raise ConfigError(f"{where}: name = {shown}; use at most {MAX_NAME} letters, digits, - and _")
    periods = _periods(periods_per_year if periods_per_year is not None else
                       _table(raw, "data", where).get("periods_per_year"), where)
    symbol_classes: tuple = ()
    if asset_class_override:
        from marketcast.data.asset import asset_classes

        symbol_classes = tuple((s, c) for s, c in asset_classes(asset_class_override, symbols).items()
                               if c is not None)
    start, end = _period(_table(raw, "data", where), where, places)
    spec = Spec(path=path, name=name, symbols=symbols, data_dir=folder, asset_class=asset_class,
                on_duplicate=on_duplicate, options=options,
                grid=grid, settings=settings, models=models, ray=ray, periods_per_year=periods,
                symbol_classes=symbol_classes, start=start, end=end,
                timezone=_zone(timezone or _table(raw, "data", where).get("timezone"), where))
    dataclasses.replace(spec, symbols=symbols[:1]).cells()  # every grid point's BacktestConfig, once, now
    return spec
