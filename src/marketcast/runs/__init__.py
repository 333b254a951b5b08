"""The run store: every backtest and sweep cell as Parquet rows, queried with DuckDB (see ``store``)."""

from marketcast.runs.cells import Cell
from marketcast.runs.store import RunStore, store_root

__all__ = ["Cell", "RunStore", "store_root"]
