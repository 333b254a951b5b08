"""Writing the run store: a run's ``run.json``, its parts, its ``summary.json`` and the lock a writer holds.
It lives apart from the reading (:mod:`marketcast.runs.read`), which it uses but which never uses it.

A part is written to a hidden temporary name, flushed to disk and renamed: a process killed while writing
leaves no file a query would read, and a cell's rows (all in one part) appear together or not at all. Parts
are only ever added (and merged only by :func:`marketcast.runs.compact.compact`), and a run is resumed only by
one process at a time (:meth:`StoreWriter.lock`), so no cell is recorded twice.

A run is in the store only once its work has started: a new run whose first record fails (a full disk under
its first part) or that fails before its first cell is removed whole (:meth:`StoreWriter.discard`), never left
listed as ``planned`` with nothing in it.

``summary.json`` holds what ``runs list`` shows of the run's cells (ok, failed, symbols, models) and the name
and size of each live file it was counted from; it is written when a run is recorded or compacted, and a
reader that finds other live files (a part added since, a file rewritten) counts the run again instead.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import time
import uuid
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from marketcast.errors import ConfigError, StateError
from marketcast.fileio import write_atomic, write_error
from marketcast.runs.read import LOCK, RUN_COUNTS_SQL, STATUSES, SUMMARY, StoreReader

if TYPE_CHECKING:
    import pyarrow as pa


def _column(name: str, values: list) -> pa.Array:
    import pyarrow as pa

    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        kinds = sorted({type(v).__name__ for v in values if v is not None})
        raise StateError(f"run store column {name!r} mixes {', '.join(kinds)} ({exc})") from None


def rows_table(rows: list[dict]) -> pa.Table:
    """One Arrow table from rows with different keys (a key a row lacks is NULL there)."""
    import pyarrow as pa

    names = list(dict.fromkeys(k for row in rows for k in row))
    return pa.table({n: _column(n, [row.get(n) for row in rows]) for n in names})


LOCK_WAITS = (0.01, 0.05, 0.2)  # seconds between the tries of a taken lock (a reader's probe lets go at once)


class StoreWriter:
    """Write the runs under ``reader``'s root; ``reader`` counts a run for its summary."""

    def __init__(self, reader: StoreReader) -> None:
        self.reader = reader

    def _mkdir(self, folder: Path) -> None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise write_error(folder, exc, StateError, "cannot create the run store folder") from None

    def write_info(self, run_id: str, info: dict) -> None:
        """Replace ``run.json`` (atomically) with ``info``; a ``status`` must be one of :data:`STATUSES`."""
        if info.get("status") is not None and info["status"] not in STATUSES:
            raise ValueError(f"run status {info['status']!r} is not one of {', '.join(STATUSES)}")
        folder = self.reader.run_dir(run_id)
        self._mkdir(folder)
        text = json.dumps({"run_id": run_id, **info}, indent=2, default=str) + "\n"
        write_atomic(folder / "run.json", lambda tmp: tmp.write_text(text), StateError)

    def mark_status(self, run_id: str, status: str) -> None:
        """Set the run's ``status`` in its ``run.json``, keeping the rest (e.g. ``interrupted`` on SIGTERM)."""
        self.write_info(run_id, {**self.reader.info(run_id), "status": status})

    def write_rows(self, run_id: str, rows: list[dict]) -> Path | None:
        """Add one part holding ``rows`` (all rows of every cell in it); None when there are none."""
        if not rows:
            return None
        import pyarrow.parquet as pq

        folder = self.reader.run_dir(run_id)
        self._mkdir(folder)
        table = rows_table(rows)
        final = folder / f"part-{time.time_ns():020d}-{uuid.uuid4().hex[:6]}.parquet"
        write_atomic(final, lambda tmp: pq.write_table(table, tmp, compression="zstd"), StateError)
        return final

    @contextmanager
    def lock(self, run_id: str) -> Iterator[None]:
        """Hold the run for this process (the OS releases it when the process dies, even by SIGKILL). The
        temporary files of a writer killed mid-write are removed here: no one else writes the run now. A reader
        probing the lock (:meth:`StoreReader.writing`) holds it for microseconds: it is tried again for a
        moment before the run is called taken."""
        folder = self.reader.run_dir(run_id)
        self._mkdir(folder)
        try:
            fh = open(folder / LOCK, "a")
        except OSError as exc:  # a full disk (no inode left), a read-only store: named, exit 3
            with suppress(OSError):
                folder.rmdir()  # the folder just made for the lock, when it holds nothing else
            raise write_error(folder / LOCK, exc, StateError, "cannot create the lock file") from None
        try:
            for wait in (*LOCK_WAITS, None):
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if wait is None:
                        raise StateError(f"run {run_id} is being written by another process; wait for it to "
                                         "finish") from None
                    time.sleep(wait)
            for leftover in folder.glob(".*.tmp"):
                leftover.unlink(missing_ok=True)
            yield
        finally:
            fh.close()

    def discard(self, run_id: str) -> None:
        """Remove the run's folder whole: a new run whose start failed (its ``run.json``, a part, its lock)."""
        shutil.rmtree(self.reader.run_dir(run_id), ignore_errors=True)

    @contextmanager
    def new_run(self, run_id: str) -> Iterator[None]:
        """Record a new run in the block, all or nothing: a failure or a signal inside it removes the run
        (:meth:`discard`), so a full disk under the first part leaves no ``planned`` run behind."""
        if self.reader.run_dir(run_id).exists():
            raise StateError(f"run {run_id} already exists in {self.reader.root}; choose another run id")
        try:
            yield
        except BaseException:
            self.discard(run_id)
            raise

    def write_summary(self, run_id: str, rows: list[dict] | None = None) -> None:
        """Count the run's cells (:data:`RUN_COUNTS_SQL`) into its ``summary.json``, for ``runs list``; ``rows``:
        every row of the run, just written (one part, no retried attempt), counted here without DuckDB."""
        reader = self.reader
        files = reader.files_key(run_id)
        if rows is not None and len(files or ()) == 1 and not any("attempt" in r for r in rows):
            cells = [r for r in rows if r.get("strategy") is None]
            models = sorted({r["model"] for r in cells if r.get("model") is not None})
            found = [{"ok": sum(r.get("status") == "ok" for r in cells),
                      "failed": sum(r.get("status") not in ("ok", None) for r in cells),
                      "symbols": len({r["symbol"] for r in cells if r.get("symbol") is not None}),
                      "models": ",".join(models) if models else None}] if cells else []
        else:
            try:
                found = reader.query(RUN_COUNTS_SQL, run_ids=[run_id]).to_dict("records")
            except ConfigError:  # rows without the columns listed (hand-made): runs list says why, if asked
                return
        if files is None or files != reader.files_key(run_id) or reader.found_damaged(reader.parts(run_id)):
            return  # written to meanwhile, or a damaged file: the next reader counts it (and names the file)
        counts = {k: (v if isinstance(v, str) or v is None else int(v)) for k, v in found[0].items()
                  if k != "run_id"} if found else {"ok": 0, "failed": 0, "symbols": 0, "models": None}
        text = json.dumps({"files": files, **counts}) + "\n"
        write_atomic(reader.run_dir(run_id) / SUMMARY, lambda tmp: tmp.write_text(text), StateError)
