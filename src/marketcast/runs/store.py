"""The run store: a folder of Parquet files, one sub-folder per run, queried with DuckDB.

Layout (``out/runs/`` by default, ``MARKETCAST_RUN_STORE`` or ``--store`` elsewhere; ``off`` disables the
recording of backtests)::

    out/runs/<run_id>/run.json                    what the run is: kind, spec, cells planned, code version
    out/runs/<run_id>/part-<time>-<rand>.parquet  rows of the cells finished since the previous part

A part is written to a hidden temporary name, flushed to disk and renamed: a process killed while writing
leaves no file a query would read, and a cell's rows (all in one part) appear together or not at all.
Parts are only ever added, and a run is resumed only by one process at a time (``lock``), so no cell is
recorded twice. Columns differ between parts as the backtest gains metrics; DuckDB unions them by name.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pandas as pd
import pyarrow as pa

from marketcast.errors import ConfigError, StateError
from marketcast.fileio import write_atomic

DEFAULT_STORE = Path("out/runs")
STORE_ENV = "MARKETCAST_RUN_STORE"
OFF = ("off", "none", "0", "false")
_PART_GLOB = "part-*.parquet"


def store_root(option: str | Path | None = None) -> Path | None:
    """``--store``, else ``MARKETCAST_RUN_STORE``, else ``out/runs``; None when set to ``off``."""
    value = str(option) if option is not None else os.environ.get(STORE_ENV, "").strip() or str(DEFAULT_STORE)
    return None if value.lower() in OFF else Path(value)


def _column(name: str, values: list) -> pa.Array:
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        kinds = sorted({type(v).__name__ for v in values if v is not None})
        raise StateError(f"run store column {name!r} mixes {', '.join(kinds)} ({exc})") from None


def rows_table(rows: list[dict]) -> pa.Table:
    """One Arrow table from rows with different keys (a key a row lacks is NULL there)."""
    names = list(dict.fromkeys(k for row in rows for k in row))
    return pa.table({n: _column(n, [row.get(n) for row in rows]) for n in names})


class RunStore:
    """Write and query the runs under ``root``."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    # --- writing ----------------------------------------------------------------------------------------

    def run_dir(self, run_id: str) -> Path:
        return self.root / run_id

    def _mkdir(self, folder: Path) -> None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateError(f"{folder}: cannot create the run store folder ({exc.strerror})") from None

    def write_info(self, run_id: str, info: dict) -> None:
        folder = self.run_dir(run_id)
        self._mkdir(folder)
        text = json.dumps({"run_id": run_id, **info}, indent=2, default=str) + "\n"
        write_atomic(folder / "run.json", lambda tmp: tmp.write_text(text), StateError)

    def write_rows(self, run_id: str, rows: list[dict]) -> Path | None:
        """Add one part holding ``rows`` (all rows of every cell in it); None when there are none."""
        if not rows:
            return None
        import pyarrow.parquet as pq

        folder = self.run_dir(run_id)
        self._mkdir(folder)
        table = rows_table(rows)
        final = folder / f"part-{time.time_ns():020d}-{uuid.uuid4().hex[:6]}.parquet"
        write_atomic(final, lambda tmp: pq.write_table(table, tmp, compression="zstd"), StateError)
        return final

    @contextmanager
    def lock(self, run_id: str) -> Iterator[None]:
        """Hold the run for this process (the OS releases it when the process dies, even by SIGKILL). The
        temporary files of a writer killed mid-write are removed here: no one else writes the run now."""
        folder = self.run_dir(run_id)
        self._mkdir(folder)
        fh = open(folder / ".lock", "a")
        try:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise StateError(f"run {run_id} is being written by another process; wait for it to finish") from None
            for leftover in folder.glob(".*.tmp"):
                leftover.unlink(missing_ok=True)
            yield
        finally:
            fh.close()

    # --- reading ----------------------------------------------------------------------------------------

    def run_ids(self) -> list[str]:
        """Runs with a ``run.json``, oldest first."""
        if not self.root.is_dir():
            return []
        runs = [p.parent.name for p in self.root.glob("*/run.json")]
        return sorted(runs, key=lambda run: (self.info(run).get("created_at", ""), run))

    def info(self, run_id: str) -> dict:
        path = self.run_dir(run_id) / "run.json"
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            raise ConfigError(f"no run {run_id!r} in {self.root}; see 'marketcast runs list'") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise StateError(f"{path}: cannot be read ({exc})") from None

    def resolve(self, ref: str) -> str:
        """A run id from its full id, a unique prefix, or ``latest``."""
        runs = self.run_ids()
        if not runs:
            raise ConfigError(f"the run store {self.root} holds no runs yet; run 'marketcast backtest' or "
                              "'marketcast sweep' first")
        if ref == "latest":
            return runs[-1]
        if ref in runs:
            return ref
        matches = [r for r in runs if r.startswith(ref)]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise ConfigError(f"run {ref!r} is ambiguous: {', '.join(matches[:5])}; give more of the id")
        raise ConfigError(f"no run {ref!r} in {self.root}; see 'marketcast runs list'")

    def parts(self, run_id: str | None = None) -> list[Path]:
        pattern = f"{run_id}/{_PART_GLOB}" if run_id else f"*/{_PART_GLOB}"
        return sorted(self.root.glob(pattern)) if self.root.is_dir() else []

    def connect(self, run_ids: list[str] | None = None):
        """A DuckDB connection with the views ``rows`` (every row of the runs), ``cells`` (cell rows) and
        ``results`` (strategy rows); ``run_ids`` None = the whole store."""
        import duckdb

        files = [p for r in run_ids for p in self.parts(r)] if run_ids is not None else self.parts()
        con = duckdb.connect()
        if files:
            listing = ", ".join("'" + str(p).replace("'", "''") + "'" for p in files)
            con.execute(f"CREATE VIEW rows AS SELECT * FROM read_parquet([{listing}], union_by_name = true)")
        else:
            con.execute("CREATE VIEW rows AS SELECT NULL::VARCHAR AS run_id, NULL::VARCHAR AS cell_id, "
                        "NULL::VARCHAR AS strategy, NULL::VARCHAR AS status WHERE false")
        con.execute("CREATE VIEW cells AS SELECT * FROM rows WHERE strategy IS NULL")
        con.execute("CREATE VIEW results AS SELECT * FROM rows WHERE strategy IS NOT NULL")
        return con

    def query(self, sql: str, params: list | None = None, run_ids: list[str] | None = None) -> pd.DataFrame:
        import duckdb

        con = self.connect(run_ids)
        try:
            return con.execute(sql, params or []).df()
        except duckdb.Error as exc:
            raise ConfigError(f"query failed: {str(exc).splitlines()[0]}") from None
        finally:
            con.close()

    def columns(self, run_ids: list[str] | None = None) -> list[str]:
        return list(self.query("SELECT * FROM rows LIMIT 0", run_ids=run_ids).columns)

    def finished(self, run_id: str) -> set[str]:
        """Cell ids with a cell row in ``run_id`` (ok or failed)."""
        found = self.query("SELECT DISTINCT cell_id FROM cells", run_ids=[run_id])
        return set(found["cell_id"])
