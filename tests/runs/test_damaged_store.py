"""Nothing half-written stops a reader: an empty store, a planned run, a damaged run.json or part, a run
marked interrupted, a read-only store folder; ``runs query`` reads the store's parts and nothing else."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from marketcast.commands import main
from marketcast.errors import ConfigError, StateError, StoreWarning
from marketcast.runs.overview import list_runs
from marketcast.runs.record import record_backtest
from marketcast.runs.store import RunStore

from .conftest import OPTIONS


@pytest.fixture(scope="module")
def pristine(results, embedded_bars, tmp_path_factory) -> tuple[Path, str]:
    """A store holding one real backtest run (SP500 and NASDAQ, 8 strategies each); tests damage copies."""
    root = tmp_path_factory.mktemp("pristine") / "runs"
    run = record_backtest(results, embedded_bars, OPTIONS, store=root)
    return root, run


@pytest.fixture
def store(pristine, tmp_path) -> tuple[Path, str]:
    root, run = pristine
    shutil.copytree(root, tmp_path / "runs")
    return tmp_path / "runs", run


def _cli(capsys, *args: str) -> tuple[int, str, list[str]]:
    """``marketcast ARGS``: (exit code, stdout, the lines of stderr)."""
    capsys.readouterr()
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip().splitlines()


def _one_error(lines: list[str], *words: str) -> None:
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert "Traceback" not in lines[0] and all(w in lines[0] for w in words), lines


# --- 1. an empty store ------------------------------------------------------------------------------------

@pytest.mark.parametrize("made", [True, False], ids=["empty-folder", "no-folder"])
def test_an_empty_or_missing_store_lists_no_runs_and_exits_0(tmp_path, capsys, made):
    root = tmp_path / "runs"
    if made:
        root.mkdir()
    code, out, err = _cli(capsys, "runs", "list", "--store", str(root))
    assert code == 0 and err == [] and f"the run store {root} holds no runs yet" in out
    code, out, err = _cli(capsys, "runs", "list", "--store", str(root), "--json")
    assert (code, json.loads(out), err) == (0, [], [])
    code, out, err = _cli(capsys, "runs", "query", "SELECT symbol, count(*) AS n FROM results GROUP BY symbol",
                          "--store", str(root), "--json")
    assert (code, json.loads(out), err) == (0, [], [])
    for args in (["runs", "show", "latest"], ["runs", "compare", "latest", "latest"], ["report", "latest"]):
        code, _, err = _cli(capsys, *args, "--store", str(root))
        assert code == 2, args
        _one_error(err, f"the run store {root} holds no runs yet")
    code, _, err = _cli(capsys, "runs", "query", 'SELECT "metrics.hit_rate" FROM cells', "--store", str(root))
    assert code == 2
    _one_error(err, "metrics.hit_rate", "holds no rows yet")
    assert made == root.exists()  # reading made no folder


def test_a_file_as_the_store_is_one_line_exit_3(tmp_path, capsys):
    root = tmp_path / "runs"
    root.write_text("not a store")
    for args in (["runs", "list"], ["runs", "show", "latest"], ["report", "latest"], ["runs", "query", "SELECT 1"]):
        code, out, err = _cli(capsys, *args, "--store", str(root))
        assert code == 3 and out == "", args
        _one_error(err, f"{root} is not a folder, so it is no run store")
    assert root.read_text() == "not a store"


def test_an_unknown_run_is_one_line_exit_2(store, capsys):
    root, _ = store
    for args in (["runs", "show", "nope"], ["runs", "compare", "nope", "latest"], ["report", "nope"],
                 ["runs", "query", "SELECT 1", "--run", "nope"]):
        code, _, err = _cli(capsys, *args, "--store", str(root))
        assert code == 2, args
        _one_error(err, "no run 'nope'", str(root))


# --- 2. planned, interrupted and damaged runs -------------------------------------------------------------

def _damage(root: Path, run: str) -> dict[str, Path]:
    """A planned run, three damaged run.json files, an empty part and a part cut short beside ``run``."""
    store = RunStore(root)
    store.write_info("sweep-planned", {"kind": "sweep", "created_at": "2030-01-01T00:00:00", "cells_total": 4,
                                       "status": "planned"})
    bad = {}
    for name, text in (("cut", '{"kind": "sweep", "created_a'), ("list", "[1, 2]"),
                       ("types", '{"kind": "sweep", "cells_total": "four"}'), ("status", '{"status": "paused"}')):
        (root / f"sweep-{name}").mkdir()
        bad[name] = root / f"sweep-{name}" / "run.json"
        bad[name].write_text(text)
    good = store.parts(run)[0]
    bad["empty"] = good.with_name("part-00000000000000000001-empty0.parquet")
    bad["empty"].write_bytes(b"")
    bad["short"] = good.with_name("part-00000000000000000002-short0.parquet")
    bad["short"].write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    return bad


def _one_warning(lines: list[str], named: list[Path]) -> str:
    warned = [line for line in lines if line.startswith("warning: ")]
    assert len(warned) == 1, lines
    assert all(str(p) in warned[0] for p in named), (warned[0], named)
    return warned[0]


def test_damaged_files_are_skipped_with_one_warning_naming_each(store, capsys):
    root, run = store
    bad = _damage(root, run)
    code, out, err = _cli(capsys, "runs", "list", "--store", str(root), "--json")
    assert code == 0
    line = _one_warning(err, list(bad.values()))
    assert "not valid JSON" in line and "holds a JSON list" in line and "'cells_total' is 'four'" in line
    assert "status 'paused' is not one of planned, running, done, interrupted" in line
    assert "is empty (0 bytes)" in line and "cannot be read as Parquet" in line
    listed = {r["run_id"]: r for r in json.loads(out)}
    assert list(listed) == [run, "sweep-planned"]
    mine = listed[run]
    assert (mine["ok"], mine["failed"], mine["planned"], mine["status"]) == (2, 0, 2, "done")
    planned = listed["sweep-planned"]
    assert (planned["ok"], planned["failed"], planned["planned"], planned["status"]) == (0, 0, 4, "planned")
    assert (planned["symbols"], planned["models"]) == (0, "")

    # the store-wide query skips the damaged parts with the warning; a command about the damaged run refuses to
    # answer from the cells left: exit 3 naming the first damaged part and the repair
    code, out, err = _cli(capsys, "runs", "query", "SELECT symbol, count(*) AS n FROM results GROUP BY symbol "
                                                   "ORDER BY symbol", "--store", str(root), "--json")
    assert code == 0 and json.loads(out) == [{"symbol": "NASDAQ", "n": 8}, {"symbol": "SP500", "n": 8}]
    _one_warning(err, [bad["empty"], bad["short"]])
    out_dir = root.parent / "report"
    for args in (["runs", "show", run, "--json"], ["runs", "compare", run, run], ["report", run, "--no-html",
                 "--output-dir", str(out_dir)], ["runs", "query", "SELECT 1", "--run", run]):
        code, out, err = _cli(capsys, *args, "--store", str(root))
        assert code == 3 and out == "", args  # beside the warning about the other runs' damaged run.json files
        _one_error([line for line in err if not line.startswith("warning: ")],
                   f"run {run}: {bad['empty']} is empty (0 bytes); move that file away")
    assert not out_dir.exists()
    bad["empty"].unlink()
    code, _, err = _cli(capsys, "runs", "show", run, "--store", str(root))
    assert code == 3
    _one_error([line for line in err if not line.startswith("warning: ")], str(bad["short"]),
               "cannot be read as Parquet")
    bad["short"].unlink()
    code, out, err = _cli(capsys, "runs", "show", run, "--store", str(root), "--json")
    assert code == 0 and {(r["symbol"], r["cells"]) for r in json.loads(out)["summary"]} == {("SP500", 1),
                                                                                            ("NASDAQ", 1)}
    code, out, err = _cli(capsys, "runs", "show", "sweep-planned", "--store", str(root))
    assert code == 0 and "sweep-planned (sweep, planned, started 2030-01-01T00:00:00" in out
    assert "0 cells ok, 0 failed, 4 planned" in out
    code, _, err = _cli(capsys, "runs", "compare", run, "sweep-planned", "--store", str(root))
    assert code == 2 and "run sweep-planned has no finished cells yet" in err[-1]
    code, _, err = _cli(capsys, "report", "sweep-planned", "--store", str(root))
    assert code == 2 and "run sweep-planned has no finished cells" in err[-1]
    code, _, err = _cli(capsys, "runs", "show", "sweep-cut", "--store", str(root))
    assert code == 3
    _one_error(err, str(bad["cut"]), "is not valid JSON")


def test_the_store_api_warns_once_per_damaged_file(store):
    root, run = store
    bad = _damage(root, run)
    runs = RunStore(root)
    with pytest.warns(StoreWarning) as caught:
        with runs.one_warning():
            assert runs.run_ids() == [run, "sweep-planned"]
            assert runs.finished(run) == set(runs.query("SELECT cell_id FROM cells")["cell_id"])
            assert len(runs.finished(run)) == 2
    assert len(caught) == 1 and all(str(p) in str(caught[0].message) for p in bad.values())
    with pytest.warns(StoreWarning) as caught:  # outside one_warning: a line per file as it is found
        assert RunStore(root).finished(run) == runs.finished(run)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2 and str(bad["empty"]) in messages[0] and str(bad["short"]) in messages[1]
    (root / "sweep-types" / "run.json").write_text('{"kind": 5}')
    with pytest.raises(StateError, match="'kind' is 5, not text"):
        runs.info("sweep-types")


def test_a_run_marked_interrupted_is_listed_so_and_every_view_works(store, capsys):
    root, run = store
    runs = RunStore(root)
    created = runs.info(run)["created_at"]
    runs.mark_status(run, "interrupted")
    assert runs.info(run)["status"] == "interrupted" and runs.info(run)["created_at"] == created
    listed = list_runs(runs)
    assert listed.set_index("run_id").loc[run, "status"] == "interrupted"
    code, out, _ = _cli(capsys, "runs", "list", "--store", str(root))
    assert code == 0 and "interrupted" in out
    code, out, _ = _cli(capsys, "runs", "show", run, "--store", str(root))
    assert code == 0 and "(backtest, interrupted, started" in out and "2 cells ok, 0 failed, 2 planned" in out
    for status in ("running", "done"):
        runs.mark_status(run, status)
        with runs.lock(run):  # a live writer: its status stands
            assert list_runs(runs).set_index("run_id").loc[run, "status"] == status
    runs.mark_status(run, "running")  # no one holds the lock: the writer is gone (test_honest_store)
    assert list_runs(runs).set_index("run_id").loc[run, "status"] == "interrupted"
    runs.mark_status(run, "done")
    with pytest.raises(ValueError, match="'paused' is not one of planned, running, done, interrupted"):
        runs.mark_status(run, "paused")
    assert runs.info(run)["status"] == "done"
    with pytest.raises(ConfigError, match="no run 'nope'"):
        runs.mark_status("nope", "interrupted")
    assert not (root / "nope").exists()


def test_a_run_without_a_status_is_planned_partial_or_done_by_its_cells(tmp_path):
    runs = RunStore(tmp_path / "runs")
    for run in ("a", "b", "c"):
        runs.write_info(run, {"kind": "sweep", "created_at": f"2030-01-0{'abc'.index(run) + 1}", "cells_total": 2})
    cell = {"strategy": None, "symbol": "X", "model": "baseline", "error": None}
    runs.write_rows("b", [{"run_id": "b", "cell_id": "1", "cell_index": 0, "status": "ok", **cell}])
    runs.write_rows("c", [{"run_id": "c", "cell_id": "1", "cell_index": 0, "status": "ok", **cell},
                          {**cell, "run_id": "c", "cell_id": "2", "cell_index": 1, "status": "error", "error": "x"}])
    listed = list_runs(runs).set_index("run_id")
    assert listed["status"].to_dict() == {"a": "planned", "b": "partial", "c": "done"}
    assert listed[["ok", "failed"]].to_dict("index") == {"a": {"ok": 0, "failed": 0}, "b": {"ok": 1, "failed": 0},
                                                         "c": {"ok": 1, "failed": 1}}


# --- 3. runs query reads the store and nothing else -----------------------------------------------------

REFUSED = {
    "COPY (SELECT 1) TO 'x.csv'": "COPY is refused",
    "SELECT * FROM read_csv('/etc/hostname')": "query refused: it may read only the run store's tables (rows, "
                                               "cells, results); '/etc/hostname' is a file outside the store",
    "SELECT * FROM '/etc/passwd'": "query refused: it may read only the run store's tables (rows, cells, results); "
                                   "'/etc/passwd' is a file path",
    "SELECT * FROM 'data'": "'data' is a file path",
    "SELECT * FROM nosuch": "the run store has no table 'nosuch'; its tables are rows, cells, results",
    "ATTACH 'x.db' AS other": "ATTACH is refused",
    "INSTALL httpfs": "is refused",
    "LOAD httpfs": "is refused",
    "SET enable_external_access = true": "SET is refused",
    "CREATE TABLE x AS SELECT 1": "CREATE is refused",
    "": "the query is empty",
    "   ": "the query is empty",
    ";": "the query is empty",
    "SELECT 1; SELECT 2": "the query holds 2 statements",
    "SELECT 1; COPY (SELECT 1) TO 'x.csv'": "the query holds 2 statements",
}


def test_runs_query_refuses_anything_but_one_select_and_writes_nothing(store, capsys, tmp_path, monkeypatch):
    root, _ = store
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    for sql, why in REFUSED.items():
        code, out, err = _cli(capsys, "runs", "query", sql, "--store", str(root))
        assert code == 2, sql
        _one_error(err, why)
    assert list(cwd.iterdir()) == []  # no x.csv, no x.db, no extension folder
    code, out, err = _cli(capsys, "runs", "query", "WITH r AS (SELECT symbol, sharpe FROM results WHERE strategy = "
                                                   "'buy_hold') SELECT count(*) AS n FROM r", "--store", str(root),
                          "--json")
    assert code == 0 and json.loads(out) == [{"n": 2}] and err == []


def test_a_query_connection_cannot_reopen_external_access(store, tmp_path):
    root, run = store
    con = RunStore(root).connect()
    try:
        assert con.execute("SELECT count(*) FROM cells").fetchone() == (2,)
        for sql in ("SET enable_external_access = true", "RESET enable_external_access",
                    "SET lock_configuration = false", f"SET allowed_paths = ['{tmp_path}']"):
            with pytest.raises(duckdb.Error, match="configuration has been locked"):
                con.execute(sql)
        with pytest.raises(duckdb.Error, match="disabled by configuration"):
            con.execute(f"COPY (SELECT 1) TO '{tmp_path / 'x.csv'}'")
        with pytest.raises(duckdb.Error, match="disabled by configuration"):
            con.execute(f"SELECT * FROM read_csv('{tmp_path / 'nothing.csv'}')")
    finally:
        con.close()
    assert not (tmp_path / "x.csv").exists()


# --- 4. runs compare: a NaN is a FAIL --------------------------------------------------------------------

def _two_runs(root: Path, b_simple: dict) -> RunStore:
    runs = RunStore(root)
    for run, simple in (("run-a", {"return": 0.10, "sharpe": 1.0}), ("run-b", b_simple)):
        runs.write_info(run, {"kind": "backtest", "created_at": f"2030-01-01T00:00:0{run[-1] == 'b':d}",
                              "cells_total": 1})
        cell = {"run_id": run, "cell_id": "c1", "cell_index": 0, "symbol": "SP500", "status": "ok", "error": None}
        runs.write_rows(run, [{**cell, "strategy": None},
                              {**cell, "strategy": "simple", **simple},
                              {**cell, "strategy": "buy_hold", "return": 0.05, "sharpe": 0.5}])
    return runs


@pytest.mark.parametrize("b_simple, note", [
    ({"return": float("nan"), "sharpe": 1.0}, "SP500: simple: return is NaN in B"),
    ({"return": 0.10, "sharpe": float("nan")}, "SP500: simple: sharpe is NaN in B only"),
], ids=["return", "sharpe"])
def test_a_nan_in_either_run_fails_the_comparison(tmp_path, capsys, b_simple, note):
    root = tmp_path / "runs"
    _two_runs(root, b_simple)
    for a, b in (("run-a", "run-b"), ("run-b", "run-a")):
        code, out, _ = _cli(capsys, "runs", "compare", a, b, "--store", str(root), "--json")
        result = json.loads(out)
        assert code == 1 and result["status"] == "FAIL"
        rows = {r["strategy"]: r["status"] for r in result["rows"]}
        assert rows == {"simple": "FAIL", "buy_hold": "PASS"}
        assert (note if a == "run-a" else note.replace(" in B", " in A")) in result["notes"]


def test_equal_runs_without_a_nan_pass(tmp_path, capsys):
    root = tmp_path / "runs"
    _two_runs(root, {"return": 0.105, "sharpe": 1.1})
    code, out, _ = _cli(capsys, "runs", "compare", "run-a", "run-b", "--store", str(root), "--json")
    result = json.loads(out)
    assert code == 0 and result["status"] == "PASS" and result["notes"] == []
    assert [round(r["return_delta"], 6) for r in result["rows"]] == [0.005, 0.0]


# --- 5. a read-only store ----------------------------------------------------------------------------------

def _tree(root: Path) -> dict[str, tuple]:
    return {str(p.relative_to(root)): (p.stat().st_mode, p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))} | {".": (root.stat().st_mode, root.stat().st_mtime_ns)}


def _read_only(root: Path, on: bool) -> None:
    for p in [root, *root.rglob("*")]:
        p.chmod((0o555 if p.is_dir() else 0o444) if on else (0o755 if p.is_dir() else 0o644))


def test_a_read_only_store_serves_every_read_command(store, tmp_path):
    """The commands run in a child process that cannot write the store: as a normal user the folder's mode
    stops it; as root (which ignores modes) the child runs without the capabilities that override them."""
    root, run = store
    _read_only(root, True)
    before = _tree(root)
    setpriv = shutil.which("setpriv") if os.geteuid() == 0 else None
    prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"] if setpriv else []
    enforced = os.geteuid() != 0 or setpriv is not None  # root without setpriv: only the tree comparison holds
    env = {**os.environ, "MARKETCAST_RUN_STORE": str(root), "COLUMNS": "200"}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*prefix, sys.executable, "-m", "marketcast.commands", *args], capture_output=True,
                              text=True, env=env, cwd=tmp_path, timeout=300)

    try:
        probe = subprocess.run([*prefix, sys.executable, "-c", f"open({str(root / 'probe')!r}, 'w')"],
                               capture_output=True, text=True)
        assert not enforced or (probe.returncode != 0 and "Permission denied" in probe.stderr)  # cannot write
        listed = cli("runs", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert [(r["run_id"], r["ok"]) for r in json.loads(listed.stdout)] == [(run, 2)]
        shown = cli("runs", "show", "latest")
        assert shown.returncode == 0 and "2 cells ok, 0 failed, 2 planned" in shown.stdout, shown.stderr
        queried = cli("runs", "query", "SELECT count(*) AS n FROM results", "--json")
        assert queried.returncode == 0 and json.loads(queried.stdout) == [{"n": 16}], queried.stderr
        compared = cli("runs", "compare", run, run, "--json")
        assert compared.returncode == 0 and json.loads(compared.stdout)["status"] == "PASS", compared.stderr
        assert all(p.stderr == "" for p in (listed, shown, queried, compared))
        assert _tree(root) == before  # no lock, no cache, no temporary file: nothing changed
    finally:
        _read_only(root, False)
    assert stat.S_IMODE(root.stat().st_mode) == 0o755


def test_a_summary_missing_a_key_is_recounted_not_a_traceback(store, capsys):
    """Found by the long fuzz run: a bit flip turned summary.json's "models" into another key; the summary is
    stale then, and the counts come from the parts."""
    root, run = store
    path = root / run / "summary.json"
    data = json.loads(path.read_text())
    data["modelw"] = data.pop("models")
    path.write_text(json.dumps(data))
    code, out, err = _cli(capsys, "runs", "list", "--store", str(root), "--json")
    assert code == 0 and err == []
    [listed] = json.loads(out)
    assert (listed["run_id"], listed["ok"], listed["models"]) == (run, 2, "baseline")
