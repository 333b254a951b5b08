"""The run store: every backtest and sweep cell as Parquet rows, queried with DuckDB (see ``store``). ``Cell``
(:mod:`marketcast.runs.cells`) imports the backtest, so it is imported when asked for: ``runs list`` imports
this package and no backtest code."""

from marketcast.runs.store import RunStore, store_root

__all__ = ["Cell", "RunStore", "store_root"]


def __getattr__(name: str):
    if name == "Cell":
        from marketcast.runs.cells import Cell

        return Cell
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
