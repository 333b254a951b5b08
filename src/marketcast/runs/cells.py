"""A cell: one symbol backtested with one model and one set of settings, the unit the run store records.

A ``marketcast backtest`` of N symbols is N cells; a sweep is the product of its grid. A cell's settings are
everything that decides its result (the model options ``load_forecaster`` takes and every field of
:class:`BacktestConfig`, read generically), so equal settings on equal data give equal rows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass

from marketcast.backtest.config import BacktestConfig

MODEL_OPTIONS = ("model", "weights", "device", "dtype", "compile")


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def setting_names() -> list[str]:
    """The settings columns of a cell row, in order (the symbol comes before them)."""
    return [*MODEL_OPTIONS, *(f.name for f in dataclasses.fields(BacktestConfig)), "asset_class", "data_dir",
            "on_duplicate", "timezone"]


def digest(obj, length: int = 16) -> str:
    """A short stable hash of a JSON-able object (keys sorted)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


@dataclass(frozen=True)
class Cell:
    """Symbol x model options x backtest settings (``data_dir`` None = the embedded bars)."""

    symbol: str
    config: BacktestConfig
    model: str = "baseline"
    weights: str | None = None
    device: str = "cpu"
    dtype: str = "float32"
    compile: str | None = None
    asset_class: str | None = None
    data_dir: str | None = None
    on_duplicate: str = "error"  # how the bars' repeated timestamps were read (--on-duplicate)
    periods_per_year: float | None = None  # --periods-per-year (None: the calendar's); in the id only when set
    end: str | None = None  # a sweep's [data] end: the bars are cut after its last window; in the id only when set
    timezone: str | None = None  # the zone naive bar times were read in (--timezone; None: UTC); in the id when set

    def settings(self) -> dict:
        """Column -> value of everything but the symbol (tuples become lists, as Parquet stores them)."""
        config = {k: _plain(v) for k, v in dataclasses.asdict(self.config).items()}
        return {name: config[name] if name in config else getattr(self, name) for name in setting_names()}

    @property
    def cell_id(self) -> str:
        given = {} if self.periods_per_year is None else {"periods_per_year": self.periods_per_year}
        given = given if self.end is None else {**given, "end": self.end}
        settings = self.settings()
        if self.timezone is None:  # ids of runs recorded before --timezone existed stay the same
            del settings["timezone"]
        if self.config.exit == "close":  # and those recorded before --exit existed (the close was the rule)
            del settings["exit"]
        if not self.config.hold:  # and those recorded before --hold existed (nothing was held)
            del settings["hold"]
        return digest({"symbol": self.symbol, **settings, **given})

    @property
    def model_key(self) -> tuple:
        """What the loaded forecaster depends on (``load_forecaster``'s arguments; the seed seeds random weights)."""
        return (*(getattr(self, name) for name in MODEL_OPTIONS), self.config.seed)

    def model_options(self) -> dict:
        """Keyword arguments of ``load_forecaster`` for this cell."""
        return {"name": self.model, "weights": self.weights, "device": self.device, "dtype": self.dtype,
                "compile": self.compile, "seed": self.config.seed}
