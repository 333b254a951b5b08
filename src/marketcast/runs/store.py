"""The run store: a folder of Parquet files, one sub-folder per run, queried with DuckDB. :class:`RunStore` is
the one object a command holds; it composes the three sides of the store, each in its own module:
:mod:`marketcast.runs.read` (the runs, their live files, read-only SQL; damaged files skipped and named),
:mod:`marketcast.runs.write` (``run.json``, parts, ``summary.json``, the run's lock) and
:mod:`marketcast.runs.compact` (parts merged, swapped in by a manifest).

Layout (``out/runs/`` by default, ``MARKETCAST_RUN_STORE`` or ``--store`` elsewhere; ``off`` disables the
recording of backtests)::

    out/runs/<run_id>/run.json                        what the run is: kind, spec, cells planned, code version
    out/runs/<run_id>/part-<time>-<rand>.parquet      rows of the cells finished since the previous part
    out/runs/<run_id>/compact-<gen>-<n>.parquet       parts merged by compaction
    out/runs/<run_id>/manifest.json                   the compacted files and the parts they absorbed
    out/runs/<run_id>/summary.json                    what ``runs list`` shows of the run

``run.json`` may carry a ``status`` (:data:`~marketcast.runs.read.STATUSES`): planned before its first cell,
running, done, or interrupted (a sweep stopped by a signal).
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from marketcast.runs.compact import compact, fold
from marketcast.runs.read import StoreReader
from marketcast.runs.write import StoreWriter

DEFAULT_STORE = Path("out/runs")
STORE_ENV = "MARKETCAST_RUN_STORE"
OFF = ("off", "none", "0", "false")

if TYPE_CHECKING:
    import pandas as pd


def store_root(option: str | Path | None = None) -> Path | None:
    """``--store``, else ``MARKETCAST_RUN_STORE``, else ``out/runs``; None when set to ``off``."""
    value = str(option) if option is not None else os.environ.get(STORE_ENV, "").strip() or str(DEFAULT_STORE)
    return None if value.lower() in OFF else Path(value)


class RunStore:
    """The runs under ``root``: one reader (and its record of damaged files) shared by the writer and the
    compaction. Each method is the one of the side named; its docstring is there."""

    def __init__(self, root: str | Path) -> None:
        self.reader = StoreReader(root)
        self.writer = StoreWriter(self.reader)
        self.root = self.reader.root

    # --- reading: StoreReader ---------------------------------------------------------------------------

    def one_warning(self) -> AbstractContextManager:
        return self.reader.one_warning()

    def run_dir(self, run_id: str) -> Path:
        return self.reader.run_dir(run_id)

    def infos(self) -> dict[str, dict]:
        return self.reader.infos()

    def run_ids(self) -> list[str]:
        return self.reader.run_ids()

    def info(self, run_id: str) -> dict:
        return self.reader.info(run_id)

    def resolve(self, ref: str) -> str:
        return self.reader.resolve(ref)

    def open_run(self, ref: str) -> str:
        """The run ``ref`` names (:meth:`resolve`), checked whole before a command reads it (exit 3 naming a
        damaged file)."""
        run_id = self.reader.resolve(ref)
        self.reader.check_intact(run_id)
        return run_id

    def parts(self, run_id: str | None = None) -> list[Path]:
        return self.reader.parts(run_id)

    def summaries(self, run_ids: list[str]) -> dict[str, dict]:
        return self.reader.summaries(run_ids)

    def connect(self, run_ids: list[str] | None = None):
        return self.reader.connect(run_ids)

    def query(self, sql: str, params: list | None = None, run_ids: list[str] | None = None) -> pd.DataFrame:
        return self.reader.query(sql, params, run_ids)

    def bounded_query(self, sql: str, bounds, run_ids: list[str] | None = None) -> tuple[pd.DataFrame, bool]:
        return self.reader.bounded_query(sql, bounds, run_ids)

    def columns(self, run_ids: list[str] | None = None) -> list[str]:
        return self.reader.columns(run_ids)

    def finished(self, run_id: str) -> set[str]:
        return self.reader.finished(run_id)

    # --- writing: StoreWriter ---------------------------------------------------------------------------

    def write_info(self, run_id: str, info: dict) -> None:
        self.writer.write_info(run_id, info)

    def mark_status(self, run_id: str, status: str) -> None:
        self.writer.mark_status(run_id, status)

    def write_rows(self, run_id: str, rows: list[dict]) -> Path | None:
        return self.writer.write_rows(run_id, rows)

    def write_summary(self, run_id: str, rows: list[dict] | None = None) -> None:
        self.writer.write_summary(run_id, rows)

    def lock(self, run_id: str) -> AbstractContextManager:
        return self.writer.lock(run_id)

    def discard(self, run_id: str) -> None:
        self.writer.discard(run_id)

    def new_run(self, run_id: str) -> AbstractContextManager:
        return self.writer.new_run(run_id)

    # --- compaction -------------------------------------------------------------------------------------

    def compact(self, run_id: str, keep_parts: bool = False) -> dict:
        return compact(self.writer, run_id, keep_parts)

    def fold(self, run_id: str) -> dict:
        return fold(self.writer, run_id)
