"""SQLite helpers: WAL, explicit transactions, so a SIGKILL leaves either all of a change or none of it.

Every SQLite failure of a state database (corrupt bytes, a full disk, no permission) surfaces as one
:class:`~marketcast.errors.StateError` naming the file (exit code 3), never as a traceback; the transaction
it interrupted is rolled back, so nothing is half-written.

A database is checked read-only before it is opened for writing (:func:`check_owned`): a file another program
made (its own ``application_id`` or tables) is refused and left byte for byte as it was, instead of being given
WAL mode and our tables. Commands that only read open with :func:`connect_readonly`, which creates no file.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from typing import Iterator, Mapping

from marketcast.errors import StateError
from marketcast.trade.journal.files import private_file


def state_error(path: str | Path, exc: BaseException) -> StateError:
    text = str(exc)
    if "full" in text:
        hint = "free disk space and run again; the change in progress was rolled back"
    elif "not a database" in text or "malformed" in text or "corrupt" in text:
        hint = "the file is damaged: restore it from a backup or move it away (the loop will not trade on it)"
    elif "readonly" in text or "unable to open" in text or "permission" in text.lower():
        hint = "check the folder's permissions and free space"
    else:
        hint = "the state database cannot be used"
    return StateError(f"{path}: {text}; {hint}")


class _Rows:
    """A cursor whose reads report SQLite failures as :class:`StateError` too."""

    def __init__(self, cursor: sqlite3.Cursor, path: str) -> None:
        self._cursor, self._path = cursor, path

    def _guard(self, fn, *args):
        try:
            return fn(*args)
        except sqlite3.DatabaseError as exc:
            raise state_error(self._path, exc) from None

    def fetchone(self):
        return self._guard(self._cursor.fetchone)

    def fetchall(self):
        return self._guard(self._cursor.fetchall)

    def __iter__(self):
        return iter(self.fetchall())


class StateConnection(sqlite3.Connection):
    """``execute``/``executemany``/``executescript`` with failures turned into one-line :class:`StateError`\\ s."""

    path = ""

    def execute(self, sql, parameters=()):  # noqa: D102
        try:
            return _Rows(super().execute(sql, parameters), self.path)
        except sqlite3.DatabaseError as exc:
            raise state_error(self.path, exc) from None

    def executemany(self, sql, seq):  # noqa: D102
        try:
            return super().executemany(sql, seq)
        except sqlite3.DatabaseError as exc:
            raise state_error(self.path, exc) from None

    def executescript(self, sql):  # noqa: D102
        try:
            return super().executescript(sql)
        except sqlite3.DatabaseError as exc:
            raise state_error(self.path, exc) from None


def readonly_uri(path: str | Path) -> str:
    """A URI that reads ``path`` without creating or changing a file: ``mode=ro`` while a ``-wal`` holds commits
    not yet in the database (a running loop; SQLite reads it through the ``-shm`` beside it), else
    ``immutable=1``, which skips SQLite's lock and shared-memory files altogether
    (https://www.sqlite.org/uri.html#uriimmutable, https://www.sqlite.org/wal.html#readonly)."""
    uri = Path(path).resolve().as_uri()
    return uri + ("?mode=ro" if os.path.exists(f"{path}-wal") else "?immutable=1")


def check_owned(path: str | Path, app_id: int, tables: set[str], what: str, schema: int = 0,
                legacy: Mapping[str, set[str]] | None = None) -> bool:
    """Refuse (StateError) a database at ``path`` that is not ours, reading it only; True if it is to be made.

    Ours: absent or empty (made now), ``PRAGMA application_id`` == ``app_id``, or, from before the id was
    written, no id, tables all among ``tables`` and, when ``legacy`` names them, every table of the first
    schema with its columns (``table -> columns``): a file of another program that happens to have a table of
    one of our names (an ``intents`` table) is not ours. Anything else is someone else's file: opening it for
    writing would switch it to WAL and add our tables. Ours with a ``user_version`` above ``schema`` was written
    by a newer marketcast, and is refused too.
    """
    path = Path(path)
    if not path.exists() or (path.is_file() and path.stat().st_size == 0):
        return True
    if not path.is_file():
        raise StateError(f"{path}: not a file; move it away or choose another --state-dir")
    try:
        probe = sqlite3.connect(readonly_uri(path), uri=True)
        try:
            found_id = probe.execute("PRAGMA application_id").fetchone()[0]
            version = probe.execute("PRAGMA user_version").fetchone()[0]
            have = {r[0] for r in probe.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            lacking = sorted(f"{t}.{c}" for t, cols in (legacy or {}).items()
                             for c in cols - {r[1] for r in probe.execute(f"PRAGMA table_info({t})")})
        finally:
            probe.close()
    except sqlite3.DatabaseError as exc:
        raise state_error(path, exc) from None
    have -= {"sqlite_sequence"}
    if found_id == app_id and version > schema:
        raise StateError(f"{path}: {what} schema {version} is newer than this marketcast's ({schema}); upgrade "
                         f"marketcast (the file was left untouched)")
    if found_id == app_id or (found_id == 0 and version == 0 and have <= tables and not lacking):
        return not have
    theirs = (f"application id {found_id:#x}" if found_id else f"its tables: {', '.join(sorted(have - tables))}"
              if have - tables else f"user_version {version}" if version else
              f"no application id, and it lacks {', '.join(lacking[:3])}{' ...' if len(lacking) > 3 else ''}")
    raise StateError(f"{path}: not a marketcast {what} ({theirs}); it was left untouched: move it away or "
                     f"choose another --state-dir")


def connect_readonly(path: str | Path) -> StateConnection:
    """A state database opened for reading only (see :func:`readonly_uri`): no file is created or changed, so
    ``trade status`` works on a folder it may not write."""
    try:
        conn = sqlite3.connect(readonly_uri(path), uri=True, isolation_level=None, timeout=30.0,
                               check_same_thread=False, factory=StateConnection)
    except sqlite3.DatabaseError as exc:
        raise state_error(path, exc) from None
    conn.path = str(path)
    conn.row_factory = sqlite3.Row
    return conn


def connect(path: str | Path) -> StateConnection:
    """A state database, owner-only (:mod:`marketcast.trade.journal.files`: SQLite gives its -wal/-shm the same mode)."""
    private_file(path)
    try:
        conn = sqlite3.connect(str(path), isolation_level=None, timeout=30.0, check_same_thread=False,
                               factory=StateConnection)
    except sqlite3.DatabaseError as exc:
        raise state_error(path, exc) from None
    conn.path = str(path)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL survives a process kill
    return conn


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT, ROLLBACK on any exception (SQLite may have rolled back already, e.g. on a
    full disk: the original error is the one raised)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(StateError):
                conn.execute("ROLLBACK")
        raise
    try:
        conn.execute("COMMIT")
    except StateError:
        if conn.in_transaction:
            with contextlib.suppress(StateError):
                conn.execute("ROLLBACK")
        raise


def add_missing_columns(conn: sqlite3.Connection, table: str, columns: dict[str, str]) -> None:
    """Columns newer code added to ``table`` (``name -> declaration``), for state folders made before."""
    have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})").fetchall()}
    for name, decl in columns.items():
        if name not in have:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")
