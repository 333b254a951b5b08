"""One preparation path for every caller of the backtest engine: ``backtest``, ``forecast --calibration``,
``sweep``, ``models compare`` and ``finetune --evaluate``.

Each of them reads bars, cuts the period (:mod:`marketcast.backtest.period`), refuses to score tuned weights on
the bars they were tuned on (:func:`marketcast.forecast.tuning.guard_weights`) and hands
:func:`~marketcast.backtest.engine.run_many` the cut bars and one config per symbol. Written once here, the
guard checks the same windows everywhere: the scored ones, by :func:`scored_decisions`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import pandas as pd

from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.context import needed
from marketcast.backtest.engine import decision_ends
from marketcast.backtest.period import Period, windows_of
from marketcast.data import load_bars, load_symbol
from marketcast.data.asset import asset_classes
from marketcast.data.bars import Bars
from marketcast.data.read import SUFFIXES
from marketcast.errors import ConfigError
from marketcast.forecast.exposure import Exposure, weigh


@dataclass(frozen=True)
class DataOptions:
    """How bars are read: the data options every command shares (``--data-dir``, ``--asset-class``, ...)."""

    data_dir: Path | None = None
    asset_class: Sequence[str] | None = None  # CLASS (every symbol) or SYMBOL=CLASS entries
    on_duplicate: str = "error"
    on_bad_line: str = "error"
    periods_per_year: float | None = None
    min_rows: int | None = None
    timezone: str | None = None  # the zone of naive timestamps (--timezone; None: UTC)


@dataclass(frozen=True)
class Inputs:
    """Bars as read from their files (what the run store fingerprints), and the folder they were found in."""

    bars: list[Bars]
    data_dir: Path | None


def file_arguments(symbols: Sequence[str]) -> dict[str, Path]:
    """The arguments that name a file (an existing file, or a name ending in .csv/.parquet) -> their path; a
    file that does not exist is a one-line error."""
    files = {}
    for arg in symbols:
        path = Path(arg).expanduser()
        if path.is_file() or path.suffix.lower() in SUFFIXES:
            if not path.is_file():
                raise ConfigError(f"{arg}: no such file; pass a symbol or the path of a .csv/.parquet file of bars")
            files[arg] = path
    return files


def load_inputs(symbols: Sequence[str], data: DataOptions = DataOptions()) -> Inputs:
    """Read each symbol (from ``data.data_dir`` or the embedded bars) or file (its symbol is its stem). When
    every argument is a file of one folder, that folder becomes the data folder, so the run store finds the
    files again as ``<SYMBOL>.csv``."""
    files = file_arguments(symbols)
    names = [files[s].stem.upper() if s in files else s.upper() for s in symbols]
    if len(set(names)) != len(names):
        raise ConfigError(f"symbols repeat: {', '.join(names)}")
    classes = asset_classes(list(data.asset_class or ()), names)
    read = {"on_duplicate": data.on_duplicate, "periods_per_year": data.periods_per_year,
            "on_bad_line": data.on_bad_line, "timezone": data.timezone,
            **({} if data.min_rows is None else {"min_rows": data.min_rows})}
    bars = [load_bars(files[s], symbol=n, asset_class=classes[n], **read) if s in files else
            load_symbol(n, data_dir=data.data_dir, asset_class=classes[n], **read)
            for s, n in zip(symbols, names)]
    data_dir = data.data_dir
    folders = {str(p.resolve().parent) for p in files.values()}
    if files and data_dir is None and len(folders) == 1 and len(files) == len(symbols):
        data_dir = Path(folders.pop())
    return Inputs(bars, data_dir)


def scored_decisions(bars: Bars, config: BacktestConfig, min_context: int = 2) -> pd.DatetimeIndex:
    """The decision bars of the windows a run scores: :func:`decision_ends` less the latest bar, whose forecast
    has no bar t+1 to be scored on. The tuned-weights guard checks exactly these, for every caller."""
    where = f"{bars.symbol} ({bars.source or 'bars'})"
    return bars.frame.index[decision_ends(len(bars), replace(config, include_latest=False), min_context, where)]


@dataclass
class Prepared:
    """What :func:`~marketcast.backtest.engine.run_many` needs, and what the reports say about tuned weights."""

    whole: list[Bars]  # as read: what the store fingerprints and the guard compares with tuning.json
    bars: list[Bars]  # cut to the period: what the engine reads
    configs: list[BacktestConfig]  # one per symbol: a dated period's window count depends on its bars
    min_context: int = 2  # real bars the first scored window holds (--min-context, else the model's minimum)
    exposure: Exposure = field(default_factory=Exposure)  # tuning record, checkpoint card, provenance mark

    def decisions(self) -> list[pd.DatetimeIndex]:
        """Each symbol's scored decision bars (:func:`scored_decisions`)."""
        return [scored_decisions(b, c, self.min_context) for b, c in zip(self.bars, self.configs)]

    def label(self, results: Sequence) -> None:
        """Mark each result's ``forecast_meta`` in or out of sample, inside pretraining data, of unknown provenance
        (:meth:`~marketcast.forecast.exposure.Exposure.meta`; every report reads the labels from there)."""
        frames = {b.symbol.upper(): b.frame for b in self.whole}
        for r in results:
            meta = self.exposure.meta(r.symbol, r.decision_times, frames.get(r.symbol.upper()))
            r.forecast_meta = {**r.forecast_meta, **meta}


def prepare(whole: Sequence[Bars], period: Period, config: BacktestConfig, *, min_context: int = 2,
            weights: str | Path | None = None, allow_in_sample: bool = False, fix: str | None = None,
            model: str | None = None, require_clean: bool = False) -> Prepared:
    """Cut ``period`` out of each symbol's bars, give each its config, and refuse (one line, exit 2) tuned
    ``weights`` on a scored window on or before their ``until`` unless ``allow_in_sample``; ``fix`` is that
    line's advice (see :func:`~marketcast.forecast.tuning.guard_weights`). Without a tuning record nothing is
    checked here: a window count the bars cannot hold fails in the engine, as for any run.

    ``min_context`` is the model's own minimum; ``config.min_context`` (``--min-context``) replaces it, never below
    it (:func:`marketcast.backtest.context.needed`): a period's first window is the first holding that many real
    bars, and :attr:`Prepared.min_context` is that number.

    ``model`` names the model, so that ``auto`` weights are known as its public checkpoint and their scored
    windows labelled by its card (:mod:`marketcast.forecast.cards`). ``require_clean`` refuses, in one line,
    rather than labels: a window in sample (whatever ``allow_in_sample``), inside or possibly inside the
    checkpoint's pretraining data, or weights of unknown provenance (neither a known checkpoint nor tuned)."""
    need = needed(config.min_context, min_context)
    cut = [windows_of(b, period, need) for b in whole]
    prepared = Prepared(list(whole), [b for b, _ in cut],
                        [config if period.fixed else replace(config, windows=w) for _, w in cut], need)
    prepared.exposure = weigh(model, weights, lambda: [(b.symbol, w.frame, d) for b, w, d in zip(
        prepared.bars, prepared.whole, prepared.decisions())], allow_in_sample=allow_in_sample,
        require_clean=require_clean, fix=fix)
    return prepared
