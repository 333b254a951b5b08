"""A journal.db that is not marketcast's is refused and left byte for byte as it was; ``trade status`` only
reads (a read-only folder works, nothing in it is created or changed); a file given as the state folder is
exit 2."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest

from marketcast.commands import main
from marketcast.errors import StateError
from marketcast.trade.journal.state import APP_ID, SCHEMA_VERSION, Intent, Journal


def snapshot(folder: Path) -> dict[str, tuple[int, str]]:
    """Every entry of ``folder``: its mode and, for a file, the sha256 of its bytes."""
    return {p.name: (p.stat().st_mode, hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "")
            for p in sorted(folder.iterdir())}


def foreign_db(path: Path) -> str:
    """Another program's SQLite database (its own table and rows); returns its sha256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.executemany("INSERT INTO notes (body) VALUES (?)", [("groceries",), ("taxes 2025",)])
    conn.commit()
    conn.close()
    return hashlib.sha256(path.read_bytes()).hexdigest()


def filled_journal(state: Path) -> None:
    """A journal with two finished cycles, one submitted order and its fill, closed (WAL checkpointed)."""
    from marketcast.trade.types import Fill

    journal = Journal(state / "journal.db")
    for bar in ("2024-01-02T00:00:00+00:00", "2024-01-03T00:00:00+00:00"):
        journal.start_cycle(bar)
        journal.finish_cycle(bar)
    journal.record_intent(Intent("mc-1", "2024-01-03T00:00:00+00:00", "maxdiff", "SP500", "buy", 2, "limit",
                                 100.0, None, "day"))
    journal.mark("mc-1", "submitted", broker_order_id="b-1")
    journal.add_fills([Fill("f-1", "mc-1", "SP500", "buy", 2, 99.5, 0.1, "2024-01-03T15:00:00Z", "entry", "b-1")])
    journal.close()


def status_rows(out: str) -> dict[str, str]:
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if len(cells) == 2 and cells[0]:
            rows[cells[0]] = cells[1]
    return rows


def test_a_foreign_database_is_refused_by_status_and_by_the_loop_and_never_modified(tmp_path, capsys):
    state = tmp_path / "state"
    before = foreign_db(state / "journal.db")
    mode = (state / "journal.db").stat().st_mode
    assert main(["trade", "status", "--state-dir", str(state)]) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1
    assert "not a marketcast journal (its tables: notes); it was left untouched" in err
    with pytest.raises(StateError, match="not a marketcast journal"):
        Journal(state / "journal.db")  # as `trade run` / `resume` / `reconcile` / `replay` open it
    assert hashlib.sha256((state / "journal.db").read_bytes()).hexdigest() == before
    assert (state / "journal.db").stat().st_mode == mode  # not even narrowed to 0600
    assert sorted(p.name for p in state.iterdir()) == ["journal.db"]  # no -wal, no -shm


def test_another_programs_application_id_is_refused_even_with_our_table_names(tmp_path):
    path = tmp_path / "journal.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 1234")
    conn.execute("CREATE TABLE intents (x)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StateError, match=r"application id 0x4d2"):
        Journal(path)
    assert path.read_bytes() == before


@pytest.mark.parametrize("tables", [
    "CREATE TABLE intents (id INTEGER PRIMARY KEY, body TEXT);",  # a to-do app's intents
    "CREATE TABLE intents (client_order_id TEXT PRIMARY KEY, symbol TEXT); CREATE TABLE fills (x);",
])
def test_a_file_without_our_id_whose_tables_only_share_a_name_is_refused_and_never_modified(tmp_path, capsys,
                                                                                            tables):
    """The issue's case: a foreign file with an ``intents`` table was stamped with our id and given 14 tables."""
    state = tmp_path / "state"
    state.mkdir()
    conn = sqlite3.connect(state / "journal.db")
    conn.executescript(tables + "INSERT INTO intents VALUES (1, 'x');")
    conn.commit()
    conn.close()
    before = snapshot(state)
    for argv in (["orders", "--state-dir", str(state)], ["status", "--state-dir", str(state)],
                 ["run", "--state-dir", str(state), "--once"],
                 ["replay", "--state-dir", str(state), "--start", "2017-01-01", "--end", "2017-01-31"]):
        assert main(["trade", *argv]) == 3, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and len(err.splitlines()) == 1 and "not a marketcast journal" in err, err
        assert "it was left untouched" in err
        assert snapshot(state) == before, argv  # no id, no table, no -wal, no loop.lock, no trade.log


def test_a_journal_from_a_newer_marketcast_is_refused_untouched(tmp_path):
    path = tmp_path / "journal.db"
    Journal(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StateError, match=f"journal schema {SCHEMA_VERSION + 1} is newer"):
        Journal(path)
    assert path.read_bytes() == before


@pytest.mark.parametrize("empty", [False, True])
def test_an_absent_or_empty_file_becomes_a_fresh_journal_with_our_id(tmp_path, empty):
    path = tmp_path / "state" / "journal.db"
    if empty:
        path.parent.mkdir()
        path.write_bytes(b"")
    journal = Journal(path)
    journal.start_cycle("2024-01-02T00:00:00+00:00")
    journal.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APP_ID == 0x4D434A4C
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
    assert Journal(path).last_done_cycle() is None  # reopened as ours


FIRST_JOURNAL = """
CREATE TABLE intents (
    client_order_id TEXT PRIMARY KEY, decision_ts TEXT NOT NULL, strategy TEXT NOT NULL,
    symbol TEXT NOT NULL, side TEXT NOT NULL, qty REAL NOT NULL, type TEXT NOT NULL,
    limit_price REAL, take_profit REAL, time_in_force TEXT NOT NULL, status TEXT NOT NULL,
    broker_order_id TEXT, error TEXT, attempts INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL, decision TEXT);
CREATE TABLE fills (
    fill_id TEXT PRIMARY KEY, client_order_id TEXT NOT NULL, symbol TEXT NOT NULL, side TEXT NOT NULL,
    qty REAL NOT NULL, price REAL NOT NULL, fee REAL NOT NULL, ts TEXT NOT NULL, kind TEXT NOT NULL);
CREATE TABLE cycles (
    decision_ts TEXT PRIMARY KEY, status TEXT NOT NULL, started_at TEXT NOT NULL, finished_at TEXT);
CREATE TABLE submissions (
    n INTEGER PRIMARY KEY AUTOINCREMENT, client_order_id TEXT NOT NULL, at TEXT NOT NULL);
"""  # the first journal's schema (commit a3a4c6b), before the application id


def test_a_journal_written_before_the_id_is_still_opened_and_then_carries_it(tmp_path):
    path = tmp_path / "journal.db"
    conn = sqlite3.connect(path)  # the tables the first marketcast made, no application_id
    conn.executescript(FIRST_JOURNAL)
    conn.execute("INSERT INTO cycles VALUES ('2023-05-01T00:00:00+00:00', 'done', 'x', 'y')")
    conn.commit()
    conn.close()
    journal = Journal(path)
    assert journal.last_done_cycle("stock") == "2023-05-01T00:00:00+00:00"
    journal.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APP_ID
    conn.close()


def test_status_of_a_file_instead_of_a_folder_is_one_line_exit_2(tmp_path, capsys):
    not_a_folder = tmp_path / "journal.db"
    not_a_folder.write_text("x")
    assert main(["trade", "status", "--state-dir", str(not_a_folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: --state-dir {not_a_folder} is a file, not a state folder; pass the folder of `trade run` "
                   "or `trade replay` (the one holding journal.db)")


def test_status_reads_a_read_only_state_folder_and_creates_or_changes_nothing(tmp_path, capsys):
    state = tmp_path / "state"
    filled_journal(state)
    (state / "records.jsonl").write_text('{"decision_ts": "2024-01-03T00:00:00+00:00", "equity": 100000.0}\n')
    os.chmod(state, 0o555)
    try:
        before = snapshot(state)
        assert main(["trade", "status", "--state-dir", str(state)]) == 0
        captured = capsys.readouterr()
        assert captured.err == ""
        assert snapshot(state) == before  # running as root, 0555 stops nothing: the open itself must not write
    finally:
        os.chmod(state, 0o700)
    rows = status_rows(captured.out)
    assert (rows["cycles"], rows["orders_submitted"], rows["orders_filled"], rows["fills"], rows["halted"]) == (
        "2", "1", "1", "1", "no")
    assert (rows["first_bar"], rows["last_bar"]) == ("2024-01-02T00:00:00+00:00", "2024-01-03T00:00:00+00:00")


def test_status_sees_the_commits_of_a_loop_that_is_still_writing(tmp_path, capsys):
    state = tmp_path / "state"
    filled_journal(state)
    writer = Journal(state / "journal.db")  # a running loop: its commits sit in journal.db-wal
    writer.conn.execute("PRAGMA wal_autocheckpoint = 0")
    writer.start_cycle("2024-01-04T00:00:00+00:00")
    writer.finish_cycle("2024-01-04T00:00:00+00:00")
    try:
        assert (state / "journal.db-wal").stat().st_size > 0
        names = sorted(p.name for p in state.iterdir())
        assert main(["trade", "status", "--state-dir", str(state)]) == 0
        rows = status_rows(capsys.readouterr().out)
        assert (rows["cycles"], rows["last_bar"]) == ("3", "2024-01-04T00:00:00+00:00")
        assert sorted(p.name for p in state.iterdir()) == names
    finally:
        writer.close()
