"""The run store: a folder of Parquet files, one sub-folder per run, queried with DuckDB.

Layout (``out/runs/`` by default, ``MARKETCAST_RUN_STORE`` or ``--store`` elsewhere; ``off`` disables the
recording of backtests)::

    out/runs/<run_id>/run.json                    what the run is: kind, spec, cells planned, code version
    out/runs/<run_id>/part-<time>-<rand>.parquet  rows of the cells finished since the previous part

A part is written to a hidden temporary name, flushed to disk and renamed: a process killed while writing
leaves no file a query would read, and a cell's rows (all in one part) appear together or not at all.
Parts are only ever added (and merged only by :meth:`RunStore.compact`), and a run is resumed only by one
process at a time (``lock``), so no cell is recorded twice.

:meth:`RunStore.compact` merges a run's parts into a few ``compact-<generation>-<n>.parquet`` files (about
128 MB, 1M rows or 768 MB of cell records each, sorted by symbol and strategy, in 2 GB of memory) and then
swaps in ``manifest.json`` (``{"generation", "files", "absorbed"}``, written atomically). Once a run has a
manifest, its live files are the compacted ``files`` it lists plus every part *not* in ``absorbed`` (parts
written later, e.g. by ``--resume``); a compacted file it does not list (a compaction killed before its swap)
and an absorbed part (killed before deleting it) are ignored, so a crash at any point leaves every cell
readable exactly once. A sweep compacts its run when it finishes.
Columns differ between parts as the backtest gains metrics; DuckDB unions them by name.

``summary.json`` holds what ``runs list`` shows of the run's cells (ok, failed, symbols, models) and the name
and size of each live file it was counted from; it is written when a run is recorded or compacted, and a
reader that finds other live files (a part added since, a file rewritten) counts the run again instead.

``run.json`` may carry a ``status`` (:data:`STATUSES`): planned before its first cell, running, done, or
interrupted (a sweep stopped by a signal). Reading never writes: a store on a read-only disk serves every
view. A damaged ``run.json`` or part (cut short, empty, not a JSON object, a field of the wrong type) is
skipped, and named in one :class:`~marketcast.errors.StoreWarning`, so one bad file never hides the rest.
Queries run on an in-memory DuckDB that may read only the store's own parts (external access off, the
configuration locked) and take exactly one SELECT.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import time
import uuid
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pandas as pd
import pyarrow as pa

from marketcast.errors import ConfigError, StateError, StoreWarning, first_line
from marketcast.fileio import write_atomic, write_files

DEFAULT_STORE = Path("out/runs")
STORE_ENV = "MARKETCAST_RUN_STORE"
OFF = ("off", "none", "0", "false")
_PART_GLOB = "part-*.parquet"
_COMPACT_GLOB = "compact-*.parquet"
_SPILL = "compact-spill"  # DuckDB's spill folder while sorting
MANIFEST = "manifest.json"
SUMMARY = "summary.json"  # the run's counts for ``runs list``, valid while its live files are the ones it names
# a run's cells counted for ``runs list`` (the summary holds this query's answer)
RUN_COUNTS_SQL = ("SELECT run_id, count(*) FILTER (WHERE status = 'ok') AS ok, count(*) FILTER (WHERE status <> 'ok') "
                  "AS failed, count(DISTINCT symbol) AS symbols, string_agg(DISTINCT model, ',' ORDER BY model) AS "
                  "models FROM cells GROUP BY run_id")
COMPACT_ROWS = 1_000_000  # a compacted file holds about this many rows at most
COMPACT_BYTES = 128 * 2**20  # ... or about this many bytes of the parts it replaces
COMPACT_MEMORY = "2GB"  # DuckDB's memory while compacting (the end of every sweep): flat in the run's size
# ... and a file's cell records (~34 kB a cell) are sorted in that memory: a bucket holds at most this many bytes
# of them, so its sort never spills (a 100k-cell run: 3.4 GB of records, 5 files; one sort of all of them in
# 2 GB spilled for minutes)
COMPACT_SORT_BYTES = 768 * 2**20
STATUSES = ("planned", "running", "done", "interrupted")
_INFO_TYPES = {"run_id": (str,), "kind": (str,), "created_at": (str,), "code_version": (str,),
               "spec_hash": (str,), "status": (str,), "cells_total": (int,)}
# the columns of an empty store's views, so the queries of ``runs list|show`` (and most user queries) bind
_EMPTY_COLUMNS = {"run_id": "VARCHAR", "cell_id": "VARCHAR", "cell_index": "BIGINT", "kind": "VARCHAR",
                  "spec_hash": "VARCHAR", "code_version": "VARCHAR", "finished_at": "VARCHAR", "seconds": "DOUBLE",
                  "data_fingerprint": "VARCHAR", "symbol": "VARCHAR", "model": "VARCHAR", "status": "VARCHAR",
                  "error": "VARCHAR", "strategy": "VARCHAR", "best_strategy": "VARCHAR", "return": "DOUBLE",
                  "sharpe": "DOUBLE", "max_drawdown": "DOUBLE", "record": "VARCHAR", "settle_times": "TIMESTAMP[]",
                  "returns": "DOUBLE[]"}


def store_root(option: str | Path | None = None) -> Path | None:
    """``--store``, else ``MARKETCAST_RUN_STORE``, else ``out/runs``; None when set to ``off``."""
    value = str(option) if option is not None else os.environ.get(STORE_ENV, "").strip() or str(DEFAULT_STORE)
    return None if value.lower() in OFF else Path(value)


def _info_problem(data) -> str | None:
    """Why a parsed ``run.json`` cannot be used (None when it can)."""
    if not isinstance(data, dict):
        return f"holds a JSON {type(data).__name__}, not an object"
    for key, kinds in _INFO_TYPES.items():
        value = data.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
            return f"{key!r} is {value!r}, not {'a whole number' if kinds == (int,) else 'text'}"
    if data.get("status") is not None and data["status"] not in STATUSES:
        return f"status {data['status']!r} is not one of {', '.join(STATUSES)}"
    return None


def _duckdb():
    """The duckdb module, imported with SIGTERM/SIGINT deferred (:func:`~marketcast.signals.shielded`): a
    signal's exception raised inside its native module's start-up aborts the process ("Critical nanobind
    error", exit -6: a sweep stopped in its first second) instead of ending the command with 143."""
    if "duckdb" not in sys.modules:
        from marketcast.signals import shielded

        with shielded():
            import duckdb  # noqa: F401
    return sys.modules["duckdb"]


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _column(name: str, values: list) -> pa.Array:
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        kinds = sorted({type(v).__name__ for v in values if v is not None})
        raise StateError(f"run store column {name!r} mixes {', '.join(kinds)} ({exc})") from None


def _buckets(counts: list[tuple], n: int) -> list[str]:
    """``n`` (at most) WHERE clauses splitting ``(symbol, rows)`` (sorted) into runs of symbols of about equal rows."""
    total, out, start, taken = sum(c for _, c in counts), [], 0, 0
    for i, (_, c) in enumerate(counts):
        taken += c
        last = i == len(counts) - 1
        if last or (len(out) < n - 1 and taken >= total * (len(out) + 1) / n):
            lo, hi = counts[start][0], counts[i][0]
            if hi is None:  # NULL sorts last: the last bucket takes it
                lo_sql = f"symbol >= {_sql_text(lo)} OR " if lo is not None else ""
                out.append(f"({lo_sql}symbol IS NULL)")
            else:
                out.append(f"symbol BETWEEN {_sql_text(lo)} AND {_sql_text(hi)}")
            start = i + 1
    return out


def rows_table(rows: list[dict]) -> pa.Table:
    """One Arrow table from rows with different keys (a key a row lacks is NULL there)."""
    names = list(dict.fromkeys(k for row in rows for k in row))
    return pa.table({n: _column(n, [row.get(n) for row in rows]) for n in names})


class RunStore:
    """Write and query the runs under ``root``."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._damaged: dict[Path, tuple] = {}  # part -> the (size, mtime) it was found damaged at
        self._warned: set[Path] = set()
        self._batch: dict[Path, str] | None = None
        self._shared: tuple | None = None  # (the files' (path, size, mtime), the connection over them)

    # --- writing ----------------------------------------------------------------------------------------

    def run_dir(self, run_id: str) -> Path:
        return self.root / run_id

    def _mkdir(self, folder: Path) -> None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateError(f"{folder}: cannot create the run store folder ({exc.strerror})") from None

    def write_info(self, run_id: str, info: dict) -> None:
        """Replace ``run.json`` (atomically) with ``info``; a ``status`` must be one of :data:`STATUSES`."""
        if info.get("status") is not None and info["status"] not in STATUSES:
            raise ValueError(f"run status {info['status']!r} is not one of {', '.join(STATUSES)}")
        folder = self.run_dir(run_id)
        self._mkdir(folder)
        text = json.dumps({"run_id": run_id, **info}, indent=2, default=str) + "\n"
        write_atomic(folder / "run.json", lambda tmp: tmp.write_text(text), StateError)

    def mark_status(self, run_id: str, status: str) -> None:
        """Set the run's ``status`` in its ``run.json``, keeping the rest (e.g. ``interrupted`` on SIGTERM)."""
        self.write_info(run_id, {**self.info(run_id), "status": status})

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

    @contextmanager
    def one_warning(self) -> Iterator["RunStore"]:
        """Within: the damaged files found are named together in one warning at the end (one command, one line)."""
        self._batch = {}
        try:
            yield self
        finally:
            batch, self._batch = self._batch, None
            if batch:
                self._warn(batch)

    def _warn(self, skipped: dict[Path, str]) -> None:
        what = "; ".join(f"{path} {why}" for path, why in skipped.items())
        warnings.warn(StoreWarning(f"skipped {len(skipped)} damaged file{'s' if len(skipped) > 1 else ''} of the "
                                   f"run store: {what}; move {'them' if len(skipped) > 1 else 'it'} away or "
                                   "re-run what wrote it"), stacklevel=3)

    def _skip(self, path: Path, why: str) -> None:
        if path in self._warned:
            return
        self._warned.add(path)
        if self._batch is not None:
            self._batch[path] = why
        else:
            self._warn({path: why})

    def _read_info(self, run_id: str) -> tuple[dict | None, str | None]:
        """``(info, None)``, ``(None, why it is damaged)``, or ``(None, None)`` when there is no ``run.json``."""
        path = self.run_dir(run_id) / "run.json"
        try:
            text = path.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            return None, None
        except (OSError, UnicodeDecodeError) as exc:
            return None, f"cannot be read ({getattr(exc, 'strerror', None) or exc})"
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            return None, f"is not valid JSON ({exc})"
        problem = _info_problem(data)
        return (None, problem) if problem else ({**data, "run_id": run_id}, None)

    def infos(self) -> dict[str, dict]:
        """Run id -> ``run.json`` of every run with a usable one, oldest first; damaged ones are skipped."""
        if not self.root.is_dir():
            return {}
        found = {}
        for path in sorted(self.root.glob("*/run.json")):
            info, why = self._read_info(path.parent.name)
            if info is not None:
                found[path.parent.name] = info
            elif why is not None:
                self._skip(path, why)
        order = sorted(found, key=lambda run: (found[run].get("created_at") or "", run))
        return {run: found[run] for run in order}

    def run_ids(self) -> list[str]:
        """Runs with a usable ``run.json``, oldest first."""
        return list(self.infos())

    def info(self, run_id: str) -> dict:
        info, why = self._read_info(run_id)
        if why is not None:
            raise StateError(f"{self.run_dir(run_id) / 'run.json'} {why}; restore it or move the run away")
        if info is None:
            raise ConfigError(f"no run {run_id!r} in {self.root}; see 'marketcast runs list'")
        return info

    def resolve(self, ref: str) -> str:
        """A run id from its full id, a unique prefix, or ``latest``."""
        if ref not in ("latest", ".", "..") and Path(ref).name == ref and (self.run_dir(ref) / "run.json").is_file():
            self.info(ref)  # a damaged run.json, named: a StateError
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
        """The live Parquet files (absolute paths) of ``run_id`` or of the whole store, damaged ones included:
        a run's manifest files and its parts not absorbed by them (every part without a manifest)."""
        root = Path(os.path.abspath(self.root))
        if not root.is_dir():
            return []
        if run_id:
            folders = [root / run_id]
        else:
            folders = sorted({p.parent for pattern in (_PART_GLOB, MANIFEST) for p in root.glob(f"*/{pattern}")})
        return [path for folder in folders for path in self._live(folder)]

    def _manifest(self, folder: Path) -> dict | None:
        """The run's ``manifest.json``; None without one (or a damaged one, skipped with a warning)."""
        path = folder / MANIFEST
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            self._skip(path, f"cannot be read ({getattr(exc, 'strerror', None) or exc})")
            return None
        good = (isinstance(data, dict) and isinstance(data.get("generation"), int)
                and all(isinstance(data.get(k), list) and all(isinstance(n, str) and Path(n).name == n
                                                              for n in data[k]) for k in ("files", "absorbed")))
        if not good:
            self._skip(path, "is not a manifest (generation, files, absorbed)")
            return None
        return data

    def _live(self, folder: Path) -> list[Path]:
        parts = sorted(folder.glob(_PART_GLOB))
        manifest = self._manifest(folder)
        if manifest is None:
            return parts
        absorbed = set(manifest["absorbed"])
        return [folder / name for name in manifest["files"]] + [p for p in parts if p.name not in absorbed]

    def _files_key(self, run_id: str) -> list | None:
        """``[[name, size], ...]`` of the run's live files (what its summary is valid for); None if one vanished."""
        out = []
        for path in self.parts(run_id):
            try:
                out.append([path.name, path.stat().st_size])
            except OSError:
                return None
        return out

    def write_summary(self, run_id: str, rows: list[dict] | None = None) -> None:
        """Count the run's cells (:data:`RUN_COUNTS_SQL`) into its ``summary.json``, for ``runs list``; ``rows``:
        every row of the run, just written (one part, no retried attempt), counted here without DuckDB."""
        files = self._files_key(run_id)
        if rows is not None and len(files or ()) == 1 and not any("attempt" in r for r in rows):
            cells = [r for r in rows if r.get("strategy") is None]
            models = sorted({r["model"] for r in cells if r.get("model") is not None})
            found = [{"ok": sum(r.get("status") == "ok" for r in cells),
                      "failed": sum(r.get("status") not in ("ok", None) for r in cells),
                      "symbols": len({r["symbol"] for r in cells if r.get("symbol") is not None}),
                      "models": ",".join(models) if models else None}] if cells else []
        else:
            try:
                found = self.query(RUN_COUNTS_SQL, run_ids=[run_id]).to_dict("records")
            except ConfigError:  # rows without the columns listed (hand-made): runs list says why, if asked
                return
        if files is None or files != self._files_key(run_id) or any(p in self._damaged for p in self.parts(run_id)):
            return  # written to meanwhile, or a damaged file: the next reader counts it (and names the file)
        counts = {k: (v if isinstance(v, str) or v is None else int(v)) for k, v in found[0].items()
                  if k != "run_id"} if found else {"ok": 0, "failed": 0, "symbols": 0, "models": None}
        text = json.dumps({"files": files, **counts}) + "\n"
        write_atomic(self.run_dir(run_id) / SUMMARY, lambda tmp: tmp.write_text(text), StateError)

    def summaries(self, run_ids: list[str]) -> dict[str, dict]:
        """run id -> ``{ok, failed, symbols, models}`` from each run's ``summary.json`` that is still valid (the
        same live files); the others (none, stale, damaged) are left out: count them with :data:`RUN_COUNTS_SQL`."""
        out = {}
        for run_id in run_ids:
            try:
                data = json.loads((self.run_dir(run_id) / SUMMARY).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                continue
            good = (isinstance(data, dict) and all(isinstance(data.get(k), int) and not isinstance(data.get(k), bool)
                                                   for k in ("ok", "failed", "symbols"))
                    and isinstance(data.get("models"), (str, type(None))))
            if good and data.get("files") == self._files_key(run_id):
                out[run_id] = {k: data[k] for k in ("ok", "failed", "symbols", "models")}
        return out

    def _collect(self, folder: Path, manifest: dict | None) -> None:
        """Remove what no reader reads: absorbed parts, compacted files the manifest does not list, spill."""
        shutil.rmtree(folder / _SPILL, ignore_errors=True)
        listed = set(manifest["files"]) if manifest else set()
        for path in folder.glob(_COMPACT_GLOB):
            if path.name not in listed:
                path.unlink(missing_ok=True)
        for name in manifest["absorbed"] if manifest else ():
            (folder / name).unlink(missing_ok=True)

    def compact(self, run_id: str, keep_parts: bool = False) -> dict:
        """Merge the run's live files into a few sorted ones and swap in a new manifest, holding the run's lock;
        then delete the files it replaced (``keep_parts``: keep the parts, which readers then ignore). Returns
        ``{"files_before", "files_after", "rows"}``; a run already compact (one file per bucket, no new part) is
        left as it is."""
        duckdb = _duckdb()

        with self.lock(run_id):
            folder = Path(os.path.abspath(self.run_dir(run_id)))
            manifest = self._manifest(folder)
            if manifest is None and (folder / MANIFEST).exists():
                raise StateError(f"{folder / MANIFEST} is damaged; restore it or move the run away before compacting")
            if not keep_parts:
                self._collect(folder, manifest)
            else:
                shutil.rmtree(folder / _SPILL, ignore_errors=True)
            live = self._usable(self._live(folder))
            fresh = [p for p in live if p.name.startswith("part-")]
            if not live or (manifest is not None and not fresh):
                if live and not self.summaries([run_id]):
                    self.write_summary(run_id)
                return {"files_before": len(live), "files_after": len(live), "rows": None}
            size = sum(p.stat().st_size for p in live)
            con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False,
                                                     "autoload_known_extensions": False})
            try:
                con.execute(f"SET temp_directory = {_sql_text(str(folder / _SPILL))}")
                con.execute(f"SET memory_limit = '{COMPACT_MEMORY}'")  # sorting spills there beyond this
                source = f"read_parquet([{', '.join(_sql_text(str(p)) for p in live)}], union_by_name = true)"
                has_record = "record" in [d[0] for d in con.execute(f"SELECT * FROM {source} LIMIT 0").description]
                found = con.execute(f"SELECT symbol, count(*), {'sum(strlen(record))' if has_record else '0'} "
                                    f"FROM {source} GROUP BY symbol ORDER BY symbol NULLS LAST").fetchall()
                counts = [(symbol, n) for symbol, n, _ in found]
                rows, records = sum(n for _, n in counts), sum(b or 0 for _, _, b in found)
                buckets = _buckets(counts, max(1, -(-rows // COMPACT_ROWS), -(-size // COMPACT_BYTES),
                                               -(-records // COMPACT_SORT_BYTES)))
                generation = (manifest["generation"] if manifest else 0) + 1
                names = [f"compact-{generation:06d}-{i:03d}.parquet" for i in range(len(buckets))]

                def writer(where: str):
                    return lambda tmp: con.execute(
                        f"COPY (SELECT * FROM {source} WHERE {where} ORDER BY symbol, strategy NULLS FIRST, "
                        f"cell_index) TO {_sql_text(str(tmp))} (FORMAT parquet, COMPRESSION zstd)")

                write_files(folder, {name: writer(where) for name, where in zip(names, buckets)}, StateError)
            finally:
                con.close()
                shutil.rmtree(folder / _SPILL, ignore_errors=True)
            kept = set(manifest["absorbed"]) if manifest else set()
            absorbed = sorted({p.name for p in fresh} | {p.name for p in folder.glob(_PART_GLOB) if p.name in kept})
            new = {"generation": generation, "files": names, "absorbed": absorbed}
            write_atomic(folder / MANIFEST, lambda tmp: tmp.write_text(json.dumps(new, indent=1) + "\n"), StateError)
            if not keep_parts:
                self._collect(folder, new)
            self.write_summary(run_id)
            return {"files_before": len(live), "files_after": len(names), "rows": rows}

    def _usable(self, files: list[Path]) -> list[Path]:
        """``files`` without the parts already found damaged (and not rewritten since) and the empty ones."""
        out = []
        for path in files:
            try:
                st = path.stat()
            except OSError:
                continue  # gone since the listing
            if self._damaged.get(path) == (st.st_size, st.st_mtime_ns):
                continue
            if st.st_size == 0:
                self._set_damaged(path, "is empty (0 bytes)")
                continue
            out.append(path)
        return out

    def _set_damaged(self, path: Path, why: str) -> None:
        try:
            st = path.stat()
            self._damaged[path] = (st.st_size, st.st_mtime_ns)
        except OSError:
            self._damaged[path] = ()
        self._skip(path, why)

    def _blame(self, exc: Exception, files: list[Path]) -> bool:
        """Mark the parts a DuckDB error comes from as damaged (the one it names, else those whose Parquet
        footer cannot be read); False when none is to blame."""
        if self._blame_named(exc, files):
            return True
        import pyarrow.parquet as pq

        found = False
        for path in files:
            try:
                pq.read_metadata(path)
            except (OSError, pa.ArrowException) as err:
                self._set_damaged(path, f"cannot be read as Parquet ({first_line(err)})")
                found = True
        return found

    def _signature(self, files: list[Path]) -> tuple:
        out = []
        for path in files:
            try:
                st = path.stat()
            except OSError:
                return ()
            out.append((path, st.st_size, st.st_mtime_ns))
        return tuple(out)

    def _cached(self, run_ids: list[str] | None):
        """:meth:`_open`'s connection, kept while the same files (unchanged) are read: a command's queries
        over a run of many parts list and bind their schemas once. Each query takes its own cursor."""
        listed = [p for r in run_ids for p in self.parts(r)] if run_ids is not None else self.parts()
        signature = self._signature(self._usable(listed))
        if self._shared is not None and signature and self._shared[0] == signature:
            return self._shared[1], [p for p, _, _ in signature]
        con, files = self._open(run_ids)
        if self._shared is not None:
            self._shared[1].close()
        self._shared = (self._signature(files), con)
        return con, files

    def _open(self, run_ids: list[str] | None):
        """``(connection, parts it reads)``: the views over the usable parts, then external access off but for
        those files, and the configuration locked, so a query can neither read nor write anything else."""
        duckdb = _duckdb()

        listed = [p for r in run_ids for p in self.parts(r)] if run_ids is not None else self.parts()
        files = self._usable(listed)
        while True:
            con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False,
                                                     "autoload_known_extensions": False})
            try:
                if files:
                    listing = ", ".join(_sql_text(str(p)) for p in files)
                    con.execute(f"CREATE VIEW all_rows AS SELECT * FROM read_parquet([{listing}], "
                                "union_by_name = true)")
                    retried = "attempt" in {r[0] for r in con.execute("DESCRIBE all_rows").fetchall()}
                    # every attempt of a retried cell stays in all_rows (its error history); a cell's result
                    # is its latest attempt (sweep --resume --retry-failed)
                    con.execute("CREATE VIEW rows AS SELECT * FROM all_rows" + (
                        " QUALIFY coalesce(attempt, 0) = max(coalesce(attempt, 0)) OVER (PARTITION BY run_id, "
                        "cell_id)" if retried else ""))
                else:
                    typed = ", ".join(f'NULL::{kind} AS "{name}"' for name, kind in _EMPTY_COLUMNS.items())
                    con.execute(f"CREATE VIEW rows AS SELECT {typed} WHERE false")
                break
            except duckdb.Error as exc:
                con.close()
                if not self._blame(exc, files):
                    raise StateError(f"the run store {self.root} cannot be read ({first_line(exc)}); move the "
                                     "run that does not fit away") from None
                files = self._usable(files)
        con.execute("CREATE VIEW cells AS SELECT * FROM rows WHERE strategy IS NULL")
        con.execute("CREATE VIEW results AS SELECT * FROM rows WHERE strategy IS NOT NULL")
        con.execute(f"SET allowed_paths = [{', '.join(_sql_text(str(p)) for p in files)}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        return con, files

    def connect(self, run_ids: list[str] | None = None):
        """A DuckDB connection with the views ``rows`` (every row of the runs), ``cells`` (cell rows) and
        ``results`` (strategy rows); ``run_ids`` None = the whole store. It reads nothing but those parts."""
        return self._open(run_ids)[0]

    def _statement(self, sql: str):
        """The one SELECT in ``sql``: anything else (none, several, COPY, ATTACH, SET, ...) is one line."""
        duckdb = _duckdb()

        try:
            statements = duckdb.extract_statements(sql)
        except duckdb.Error as exc:
            raise ConfigError(f"query failed: {first_line(exc)}") from None
        if not statements:
            raise ConfigError("the query is empty; give one SELECT, e.g. 'SELECT * FROM results LIMIT 5'")
        if len(statements) > 1:
            raise ConfigError(f"the query holds {len(statements)} statements; give one SELECT (no ';' between "
                              "statements)")
        kind = statements[0].type
        if kind != duckdb.StatementType.SELECT:
            raise ConfigError(f"the run store is read-only: {kind.name} is refused; give one SELECT over rows, "
                              "cells or results")
        return statements[0]

    def query(self, sql: str, params: list | None = None, run_ids: list[str] | None = None) -> pd.DataFrame:
        """The result of one SELECT over the views; a part that fails to read on the way is skipped."""
        duckdb = _duckdb()

        statement = self._statement(sql)
        while True:
            shared, files = self._cached(run_ids)
            con = shared.cursor()
            try:
                return con.execute(statement, params or []).df()
            except duckdb.Error as exc:
                if files and self._blame_named(exc, files):
                    continue
                if isinstance(exc, duckdb.PermissionException):
                    raise ConfigError(f"query refused: it may read only the run store's own parts, not other "
                                      f"files ({first_line(exc)}); query the views rows, cells and results") from None
                empty = "" if files or not isinstance(exc, duckdb.BinderException) else (
                    f" (the run store {self.root} holds no rows yet)")
                raise ConfigError(f"query failed: {first_line(exc)}{empty}") from None
            finally:
                con.close()

    def _blame_named(self, exc: Exception, files: list[Path]) -> bool:
        """A query's error that names a part: that part is damaged (True); any other error is the query's."""
        message = str(exc)
        named = [p for p in files if f"'{p}'" in message or f'"{p}"' in message]
        for path in named:
            why = first_line(exc).replace(f"'{path}'", "").replace(f'"{path}"', "").replace("  ", " ")
            self._set_damaged(path, f"cannot be read as Parquet ({why.strip()})")
        return bool(named)

    def columns(self, run_ids: list[str] | None = None) -> list[str]:
        return list(self.query("SELECT * FROM rows LIMIT 0", run_ids=run_ids).columns)

    def finished(self, run_id: str) -> set[str]:
        """Cell ids with a cell row in ``run_id`` (ok or failed)."""
        found = self.query("SELECT DISTINCT cell_id FROM cells", run_ids=[run_id])
        return set(found["cell_id"])
