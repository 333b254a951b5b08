"""Reading the run store: its ``run.json`` files, each run's live Parquet files, the counts of ``runs list``
and read-only SQL over DuckDB views of the parts. It lives apart from the writing (:mod:`marketcast.runs.write`)
and the compaction (:mod:`marketcast.runs.compact`) because reading never writes: a store on a read-only disk
serves every view.

A run's live files are its parts, or, once it has a ``manifest.json`` (``{"generation", "files", "absorbed"}``,
written by compaction), the compacted ``files`` it lists plus every part *not* in ``absorbed``; a compacted
file it does not list (a compaction killed before its swap) and an absorbed part (killed before deleting it)
are ignored, so a crash at any point leaves every cell readable exactly once. Columns differ between parts as
the backtest gains metrics; DuckDB unions them by name.

The reader is the side that finds damage, so it handles it: a damaged ``run.json``, manifest or part (cut
short, empty, not a JSON object, a field of the wrong type) is skipped, and named in one
:class:`~marketcast.errors.StoreWarning`, so one bad file never hides the rest. Queries run on an in-memory
DuckDB that may read only the store's own parts (external access off, the configuration locked) and take
exactly one SELECT; a user's query (``runs query``) runs under a time and a row limit and stops at a signal
(:mod:`marketcast.runs.bounded`). Every file is read only once it is known to be a regular file
(:func:`marketcast.paths.read_regular`): a FIFO or a device in place of a ``run.json``, a manifest or a part is
damage, named, never a read that waits for ever.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import stat
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from marketcast.errors import ConfigError, StateError, StoreWarning, first_line
from marketcast.paths import read_text, special
from marketcast.runs.bounded import Bounds, limited, run_bounded
from marketcast.runs.predating import PREDATING

PART_GLOB = "part-*.parquet"
COMPACT_GLOB = "compact-*.parquet"
MANIFEST = "manifest.json"
LOCK = ".lock"  # a writer holds it (flock) while it writes the run: the OS lets go when the process dies
SUMMARY = "summary.json"  # the run's counts for ``runs list``, valid while its live files are the ones it names
# a run's cells counted for ``runs list`` (the summary holds this query's answer)
RUN_COUNTS_SQL = ("SELECT run_id, count(*) FILTER (WHERE status = 'ok') AS ok, count(*) FILTER (WHERE status <> 'ok') "
                  "AS failed, count(DISTINCT symbol) AS symbols, string_agg(DISTINCT model, ',' ORDER BY model) AS "
                  "models FROM cells GROUP BY run_id")
STATUSES = ("planned", "running", "done", "interrupted")

if TYPE_CHECKING:
    import pandas as pd
_INFO_TYPES = {"run_id": (str,), "kind": (str,), "created_at": (str,), "code_version": (str,),
               "spec_hash": (str,), "status": (str,), "cells_total": (int,)}
# the columns of an empty store's views, so the queries of ``runs list|show`` (and most user queries) bind
_EMPTY_COLUMNS = {"run_id": "VARCHAR", "cell_id": "VARCHAR", "cell_index": "BIGINT", "kind": "VARCHAR",
                  "spec_hash": "VARCHAR", "code_version": "VARCHAR", "finished_at": "VARCHAR", "seconds": "DOUBLE",
                  "data_fingerprint": "VARCHAR", "symbol": "VARCHAR", "model": "VARCHAR", "status": "VARCHAR",
                  "error": "VARCHAR", "strategy": "VARCHAR", "best_strategy": "VARCHAR", "return": "DOUBLE",
                  "sharpe": "DOUBLE", "max_drawdown": "DOUBLE", "record": "VARCHAR", "settle_times": "TIMESTAMP[]",
                  "returns": "DOUBLE[]"}


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


def read_footer(path: Path, size: int) -> tuple[list[str] | None, str | None]:
    """``(its column names, None)`` from the Parquet footer of the file at ``path`` (``size`` bytes), ``(None,
    why it cannot be read)``, or ``(None, None)`` when it is gone (a compaction removed it: not damage). A file
    cut short, empty or not Parquet is found so, by reading it, before DuckDB does (not from DuckDB's error text)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if size == 0:  # a FIFO or a device has no size either: never opened, named for what it is
        kind = special(path)
        return None, f"is {kind}, not a regular file" if kind else "is empty (0 bytes)"
    try:
        return pq.read_metadata(path).schema.names, None
    except FileNotFoundError:
        return None, None
    except (OSError, pa.ArrowException) as exc:
        return None, f"cannot be read as Parquet ({first_line(exc)})"


def _without_end(sql: str) -> str:
    """``sql`` without its closing ``;`` (and the comments after it), which cannot stand inside a subquery; a
    ``;`` in a string or a comment is no token and stays."""
    duckdb = duckdb_module()

    end = len(sql)
    for position, kind in reversed(duckdb.tokenize(sql)):
        if kind == duckdb.token_type.operator and sql[position] == ";":
            end = position
        elif kind != duckdb.token_type.comment:
            break
    return sql[:end]


#: the tables a query may read (views over the store's parts)
TABLES = "rows, cells, results"
#: how many times a read lists the parts again after one it listed vanished (a sweep folds every 64 parts:
#: far slower than a read lists, so one retry is the rule; the bound only stops a store rewritten without pause)
VANISHED_RETRIES = 10
_OUTSIDE = re.compile(r'Cannot access (?:file|directory) "([^"]*)"')
_NO_TABLE = re.compile(r"Table with name (.+?) does not exist")


def _refusal(exc, sql: str, duckdb) -> str | None:
    """A query DuckDB refused for what it named, in the project's words: which rule refused it (it read a file,
    or a table the store has not); None for the query's other errors."""
    text = str(exc)
    rule = f"query refused: it may read only the run store's tables ({TABLES})"
    if isinstance(exc, duckdb.PermissionException):
        outside = _OUTSIDE.search(text)
        return f"{rule}; {outside.group(1)!r} is a file outside the store" if outside else \
            f"{rule}; it reached outside the store ({first_line(exc)})"
    missing = _NO_TABLE.search(text) if isinstance(exc, duckdb.CatalogException) else None
    if missing is None:
        return None
    name = missing.group(1)
    if "/" in name or "\\" in name or sql_text(name) in sql:  # a quoted name is read as a file's path
        return f"{rule}; {name!r} is a file path"
    return f"query failed: the run store has no table {name!r}; its tables are {TABLES}"


def duckdb_module():
    """The duckdb module, imported with SIGTERM/SIGINT deferred (:func:`~marketcast.signals.shielded`): a
    signal's exception raised inside its native module's start-up aborts the process ("Critical nanobind
    error", exit -6: a sweep stopped in its first second) instead of ending the command with 143."""
    if "duckdb" not in sys.modules:
        from marketcast.signals import shielded

        with shielded():
            import duckdb  # noqa: F401
    return sys.modules["duckdb"]


def sql_text(value: str) -> str:
    """``value`` as a SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def sql_literal(value: str | bool) -> str:
    """``value`` (text or a boolean) as a SQL literal."""
    return str(value).upper() if isinstance(value, bool) else sql_text(value)


def _listing(files: list[Path]) -> str:
    """``files`` as the items of a SQL list of text."""
    return ", ".join(sql_text(str(p)) for p in files)


class StoreReader:
    """Read and query the runs under ``root``, skipping (and naming) the damaged files it finds."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._damaged: dict[Path, tuple] = {}  # part -> the (size, mtime) it was found damaged at
        self._footers: dict[Path, tuple] = {}  # part -> ((size, mtime) its footer was read at, its columns)
        self._warned: set[Path] = set()
        self._batch: dict[Path, str] | None = None
        self._shared: tuple | None = None  # (the files' (path, size, mtime), the connection over them)
        self.axes: dict[tuple, list[str]] = {}  # (run ids, their live files) -> the grid's axes (overview.run_axes)

    def run_dir(self, run_id: str) -> Path:
        return self.root / run_id

    # --- damaged files ----------------------------------------------------------------------------------

    @contextmanager
    def one_warning(self) -> Iterator["StoreReader"]:
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

    def _set_damaged(self, path: Path, why: str) -> None:
        try:
            st = path.stat()
            self._damaged[path] = (st.st_size, st.st_mtime_ns)
        except OSError:
            self._damaged[path] = ()
        self._skip(path, why)

    def found_damaged(self, paths: list[Path]) -> bool:
        """Whether any of ``paths`` was found damaged by this reader (rewritten since or not)."""
        return any(p in self._damaged for p in paths)

    def usable(self, files: list[Path]) -> list[Path]:
        """``files`` without the damaged ones: those already found damaged (and not rewritten since), the empty
        ones and those whose Parquet footer cannot be read, each read here once (then kept while the file's
        size and time stay): the damage is found by reading the file, before DuckDB reads it."""
        out = []
        for path in files:
            try:
                st = path.stat()
            except OSError:
                continue  # gone since the listing
            seen = (st.st_size, st.st_mtime_ns)
            if self._damaged.get(path) == seen:
                continue
            if self._footers.get(path, (None,))[0] != seen:
                names, why = read_footer(path, st.st_size)
                if names is None:
                    if why is not None:
                        self._set_damaged(path, why)
                    continue
                self._footers[path] = (seen, frozenset(names))
            out.append(path)
        return out

    def _pages_damaged(self, files: list[Path]) -> bool:
        """After a read error the footers did not explain: read every row group of each file (pyarrow), and mark
        those that fail as damaged; False when every file reads (the error is the query's). DuckDB's message for
        a garbled page need not name the file ("don't know what type"), so the file is found by reading it."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        found = False
        for path in files:
            try:
                with pq.ParquetFile(path) as parquet:
                    for group in range(parquet.num_row_groups):
                        parquet.read_row_group(group)
            except FileNotFoundError:
                continue
            except (OSError, pa.ArrowException) as exc:
                self._set_damaged(path, f"cannot be read as Parquet ({first_line(exc)})")
                found = True
        return found

    # --- runs and their files ---------------------------------------------------------------------------

    def _read_info(self, run_id: str) -> tuple[dict | None, str | None]:
        """``(info, None)``, ``(None, why it is damaged)``, or ``(None, None)`` when there is no ``run.json``."""
        path = self.run_dir(run_id) / "run.json"
        try:
            text = read_text(path)  # a FIFO or a device in its place is damage, named, not a hang
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

    def _check_root(self) -> bool:
        """Whether the store's folder exists; a file (or anything else) in its place is one StateError line."""
        if self.root.is_dir():
            return True
        if os.path.lexists(self.root):
            raise StateError(f"{self.root} is not a folder, so it is no run store; pass --store a folder (or set "
                             "MARKETCAST_RUN_STORE to one), or move the file away")
        return False

    def check_intact(self, run_id: str) -> None:
        """A run a command reads must be whole: its first damaged live file (empty, or a Parquet footer that
        cannot be read) is one StateError line naming it and the repair, not an answer from the cells left."""
        for path in self.parts(run_id):
            try:
                _, why = read_footer(path, path.stat().st_size)
            except FileNotFoundError:  # gone since the listing (a compaction): not damage
                continue
            if why is not None:
                raise StateError(f"run {run_id}: {path} {why}; move that file away (its cells are then missing "
                                 "from the run; 'marketcast sweep SPEC --resume' computes a sweep's again) and run "
                                 "again")

    def writing(self, run_id: str) -> bool:
        """Whether a live process holds the run's lock (a sweep computing it). Probed with a shared lock taken
        and let go at once, on the file opened read-only, so a read-only store is probed too; no lock file:
        no one ever wrote the run under a lock. A run whose ``run.json`` says ``running`` while no one holds it
        was stopped without its cleanup (SIGKILL, a power cut)."""
        try:  # opened without blocking: a FIFO in its place is no lock (nor a hang)
            fd = os.open(self.run_dir(run_id) / LOCK, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:  # no lock file
            return False
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return False
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            return True
        except OSError:
            return False
        finally:
            os.close(fd)
        return False

    def infos(self) -> dict[str, dict]:
        """Run id -> ``run.json`` of every run with a usable one, oldest first; damaged ones are skipped."""
        if not self._check_root():
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
        if ref not in ("latest", ".", "..") and Path(ref).name == ref and (self.run_dir(ref) / "run.json").exists():
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
        if not self._check_root():
            return []
        if run_id:
            folders = [root / run_id]
        else:
            folders = sorted({p.parent for pattern in (PART_GLOB, MANIFEST) for p in root.glob(f"*/{pattern}")})
        return [path for folder in folders for path in self.live(folder)]

    def manifest(self, folder: Path) -> dict | None:
        """The run's ``manifest.json``; None without one (or a damaged one, skipped with a warning)."""
        path = folder / MANIFEST
        try:
            data = json.loads(read_text(path))
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

    def live(self, folder: Path) -> list[Path]:
        """The run's live files in ``folder``: its manifest's files and the parts it did not absorb."""
        parts = sorted(folder.glob(PART_GLOB))
        manifest = self.manifest(folder)
        if manifest is None:
            return parts
        absorbed = set(manifest["absorbed"])
        return [folder / name for name in manifest["files"]] + [p for p in parts if p.name not in absorbed]

    def files_key(self, run_id: str) -> list | None:
        """``[[name, size], ...]`` of the run's live files (what its summary is valid for); None if one vanished."""
        out = []
        for path in self.parts(run_id):
            try:
                out.append([path.name, path.stat().st_size])
            except OSError:
                return None
        return out

    def summaries(self, run_ids: list[str]) -> dict[str, dict]:
        """run id -> ``{ok, failed, symbols, models}`` from each run's ``summary.json`` that is still valid (the
        same live files); the others (none, stale, damaged) are left out: count them with :data:`RUN_COUNTS_SQL`."""
        out = {}
        for run_id in run_ids:
            try:
                data = json.loads(read_text(self.run_dir(run_id) / SUMMARY))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                continue
            good = (isinstance(data, dict) and all(isinstance(data.get(k), int) and not isinstance(data.get(k), bool)
                                                   for k in ("ok", "failed", "symbols"))
                    and "models" in data and isinstance(data["models"], (str, type(None))))
            if good and data.get("files") == self.files_key(run_id):
                out[run_id] = {k: data[k] for k in ("ok", "failed", "symbols", "models")}
        return out

    # --- queries ----------------------------------------------------------------------------------------

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
        signature = self._signature(self.usable(listed))
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
        duckdb = duckdb_module()

        for tries in range(VANISHED_RETRIES + 1):
            listed = [p for r in run_ids for p in self.parts(r)] if run_ids is not None else self.parts()
            files = self.usable(listed)  # every footer read: the damaged files are left out before DuckDB reads any
            con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False,
                                                     "autoload_known_extensions": False})
            try:
                self._views(con, files)
                break
            except duckdb.Error as exc:
                con.close()
                if tries < VANISHED_RETRIES and any(not os.path.lexists(p) for p in files):
                    continue  # a part removed since the listing (a sweep's fold absorbed it): list again
                raise StateError(f"the run store {self.root} cannot be read ({first_line(exc)}); move the run that "
                                 "does not fit away") from None
        con.execute(f"SET allowed_paths = [{_listing(files)}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        return con, files

    def _views(self, con, files: list[Path]) -> None:
        """The views ``all_rows``, ``rows``, ``cells`` and ``results`` over ``files`` (typed, empty, without any)."""
        if files:
            seen = set().union(*(self._footers[p][1] for p in files))
            # a setting a run predates (no column in its files) reads as the value it had then (cells.PREDATING)
            then = [f'coalesce("{n}", {sql_literal(v)}) AS "{n}"' for n, v in PREDATING.items()
                    if n in seen and v is not None]
            star = f"* REPLACE ({', '.join(then)})" if then else "*"
            con.execute(f"CREATE VIEW all_rows AS SELECT {star} FROM read_parquet([{_listing(files)}], "
                        "union_by_name = true)")
            self._latest_view(con, [p for p in files if "attempt" in self._footers[p][1]])
        else:
            typed = ", ".join(f'NULL::{kind} AS "{name}"' for name, kind in _EMPTY_COLUMNS.items())
            con.execute(f"CREATE VIEW rows AS SELECT {typed} WHERE false")
        con.execute("CREATE VIEW cells AS SELECT * FROM rows WHERE strategy IS NULL")
        con.execute("CREATE VIEW results AS SELECT * FROM rows WHERE strategy IS NOT NULL")

    @staticmethod
    def _latest_view(con, retried: list[Path]) -> None:
        """The view ``rows``: every row of ``all_rows`` but the superseded attempts of a retried cell (``sweep
        --resume --retry-failed``: a cell's result is its latest attempt; ``all_rows`` keeps its error history).
        ``retried``: the files with an ``attempt`` column, the only ones that hold a retry. Their latest
        attempt per cell is a small table, and ``rows`` is ``all_rows`` ANTI JOIN it: DuckDB still pushes a
        query's ``symbol``/``cell_id`` filter into the Parquet scan, which a window over every row (QUALIFY
        max(attempt) OVER (PARTITION BY cell_id)) stopped, so one retried cell made every query read every record."""
        if not retried:
            con.execute("CREATE VIEW rows AS SELECT * FROM all_rows")
            return
        con.execute(f"CREATE TABLE latest_attempts AS SELECT run_id, cell_id, max(attempt) AS attempt FROM "
                    f"read_parquet([{_listing(retried)}], union_by_name = true) WHERE attempt IS NOT NULL "
                    "GROUP BY run_id, cell_id")
        con.execute("CREATE VIEW rows AS SELECT a.* FROM all_rows a ANTI JOIN latest_attempts l ON "
                    "l.run_id = a.run_id AND l.cell_id = a.cell_id AND l.attempt > coalesce(a.attempt, 0)")

    def connect(self, run_ids: list[str] | None = None):
        """A DuckDB connection with the views ``rows`` (every row of the runs), ``cells`` (cell rows) and
        ``results`` (strategy rows); ``run_ids`` None = the whole store. It reads nothing but those parts."""
        return self._open(run_ids)[0]

    def _statement(self, sql: str):
        """The one SELECT in ``sql``: anything else (none, several, COPY, ATTACH, SET, ...) is one line."""
        duckdb = duckdb_module()

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
        return self._execute(sql, params, run_ids, lambda result: result.df())

    def bounded_query(self, sql: str, bounds: Bounds, run_ids: list[str] | None = None) -> tuple[pd.DataFrame, bool]:
        """``runs query``: :meth:`query` with at most ``bounds.seconds`` of query time and ``bounds.rows`` rows
        (:mod:`marketcast.runs.bounded`), stopped at once by SIGINT/SIGTERM; ``(frame, whether rows were cut)``."""
        self._statement(sql)  # the user's text alone is one SELECT: the LIMIT around it cannot change that
        frame = self._execute(limited(_without_end(sql), bounds.rows), None, run_ids, lambda result: result.df(),
                              bounds.seconds)
        return frame.iloc[:bounds.rows], len(frame) > bounds.rows

    def records(self, sql: str, params: list | None = None, run_ids: list[str] | None = None) -> list[dict]:
        """:meth:`query`'s rows as plain dicts, without pandas (``runs list`` imports none)."""
        return self._execute(sql, params, run_ids, lambda result: [
            dict(zip([d[0] for d in result.description], row)) for row in result.fetchall()])

    def _execute(self, sql: str, params: list | None, run_ids: list[str] | None, fetch,
                 seconds: float | None = None):
        """``fetch`` of the statement's result; with ``seconds``, on a worker thread under that time limit."""
        duckdb = duckdb_module()

        statement = self._statement(sql)
        vanished = 0
        while True:
            shared, files = self._cached(run_ids)
            con = shared.cursor()
            try:
                if seconds is None:
                    return fetch(con.execute(statement, params or []))
                return run_bounded(con, lambda: fetch(con.execute(statement, params or [])), seconds)
            except duckdb.Error as exc:
                if vanished < VANISHED_RETRIES and any(not os.path.lexists(p) for p in files):
                    vanished += 1  # a part removed since the listing (a compaction absorbed it): list again
                    continue
                refused = _refusal(exc, sql, duckdb)
                if refused is not None:
                    raise ConfigError(refused) from None
                theirs = (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException,
                          duckdb.ConversionException)  # the query's own mistakes, not the files'
                if not isinstance(exc, theirs) and self._pages_damaged(files):
                    continue  # a file whose footer reads but whose pages do not: skipped, named, the query again
                empty = "" if files or not isinstance(exc, duckdb.BinderException) else (
                    f" (the run store {self.root} holds no rows yet)")
                raise ConfigError(f"query failed: {first_line(exc)}{empty}") from None
            finally:
                con.close()

    def columns(self, run_ids: list[str] | None = None) -> list[str]:
        return list(self.query("SELECT * FROM rows LIMIT 0", run_ids=run_ids).columns)

    def finished(self, run_id: str) -> set[str]:
        """Cell ids with a cell row in ``run_id`` (ok or failed)."""
        found = self.query("SELECT DISTINCT cell_id FROM cells", run_ids=[run_id])
        return set(found["cell_id"])
