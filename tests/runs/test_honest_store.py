"""The store tells the truth cheaply: a retried cell keeps DuckDB's filter in the Parquet scan and returns its
latest attempt; a run left ``running`` by a killed process reads as interrupted; a refused Ray connection leaves
no run; a damaged part is named by reading it, not from DuckDB's error text; ``runs list`` imports neither
pandas nor the backtest; ``runs compare`` lists its FAIL rows up to ``--limit`` and counts them all."""

from __future__ import annotations

import json
import random
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from marketcast.commands import main
from marketcast.errors import StoreWarning
from marketcast.runs.store import RunStore

SYMBOLS = ("X", "Y", "Z")


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _cell(run: str, i: int, status: str = "ok", **more) -> list[dict]:
    """A cell's row and its strategy row, symbol X, Y, Z in turn (the symbol varies fastest, as in a sweep)."""
    base = {"run_id": run, "cell_id": f"c{i}", "cell_index": i, "symbol": SYMBOLS[i % 3], "model": "baseline",
            "status": status, "error": None if status == "ok" else "boom", **more}
    return [{**base, "strategy": None, "record": f"record of c{i} {more}"},
            {**base, "strategy": "simple", "return": 0.01 * i, "sharpe": 1.0, "max_drawdown": 0.1, "record": None}]


def _retried_store(root: Path) -> RunStore:
    """Run ``r``: 30 cells; c4 (symbol Y) failed, then succeeded at attempt 1 in a later part (--retry-failed)."""
    store = RunStore(root)
    store.write_info("r", {"kind": "sweep", "created_at": "2030-01-01T00:00:00", "cells_total": 30,
                           "status": "done"})
    store.write_rows("r", [row for i in range(30) for row in _cell("r", i, "error" if i == 4 else "ok")])
    store.write_rows("r", _cell("r", 4, attempt=1))
    return store


def _scan_filters(store: RunStore, sql: str) -> list[str]:
    """The ``Filters:`` of each Parquet scan in DuckDB's plan of ``sql`` (the text of each scan's box)."""
    con = store.connect(["r"])
    try:
        plan = con.execute("EXPLAIN " + sql).fetchall()[0][1]
    finally:
        con.close()
    boxes = re.findall(r"READ_PARQUET(.*?)╰", plan, flags=re.DOTALL)
    assert boxes, plan
    return [re.sub(r"[\s│]+", " ", box) for box in boxes]


@pytest.mark.parametrize("compacted", [False, True], ids=["parts", "compacted"])
def test_a_retried_cell_keeps_the_filters_in_the_parquet_scan_and_returns_its_latest_attempt(tmp_path, compacted):
    store = _retried_store(tmp_path / "runs")
    if compacted:
        assert store.compact("r")["files_after"] == 1
    scans = _scan_filters(store, "SELECT record FROM cells WHERE symbol = 'Y'")
    assert any("Filters: symbol = 'Y'" in s or ("Filters:" in s and "symbol = 'Y'" in s) for s in scans), scans
    scans = _scan_filters(store, "SELECT record FROM cells WHERE cell_id = 'c4'")
    assert any("Filters:" in s and "cell_id = 'c4'" in s for s in scans), scans

    found = store.query("SELECT cell_id, status, record FROM cells WHERE symbol = 'Y' ORDER BY cell_index",
                        run_ids=["r"])
    assert list(found["cell_id"]) == [f"c{i}" for i in range(1, 30, 3)]  # each cell once
    c4 = found.set_index("cell_id").loc["c4"]
    assert (c4["status"], c4["record"]) == ("ok", "record of c4 {'attempt': 1}")
    history = store.query("SELECT coalesce(attempt, 0) AS attempt, status FROM all_rows WHERE cell_id = 'c4' AND "
                          "strategy IS NULL ORDER BY 1", run_ids=["r"])
    assert history.values.tolist() == [[0, "error"], [1, "ok"]]  # all_rows keeps the error history
    counts = store.query("SELECT count(*) AS n, count(*) FILTER (WHERE status = 'ok') AS ok FROM cells",
                         run_ids=["r"]).iloc[0]
    assert (int(counts["n"]), int(counts["ok"])) == (30, 30)


# --- states that do not lie ---------------------------------------------------------------------------------

HOLD = """
import sys
from marketcast.runs.store import RunStore
with RunStore(sys.argv[1]).lock(sys.argv[2]):
    print("locked", flush=True)
    sys.stdin.read()
"""


def test_a_running_run_whose_writer_was_killed_reads_as_interrupted(tmp_path, capsys):
    root = tmp_path / "runs"
    store = _retried_store(root)
    spec = tmp_path / "spec.toml"
    store.write_info("r", {**store.info("r"), "status": "running", "spec_path": str(spec)})
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(root), "r"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        code, out, _ = _cli(capsys, "runs", "list", "--store", str(root), "--json")
        assert code == 0 and json.loads(out)[0]["status"] == "running"  # a live process writes it
        code, out, _ = _cli(capsys, "runs", "show", "r", "--store", str(root))
        assert code == 0 and "(sweep, running, started" in out and "--resume" not in out
    finally:
        holder.send_signal(signal.SIGKILL)  # killed without its cleanup: run.json still says running
        holder.wait(timeout=60)
    assert store.info("r")["status"] == "running"
    code, out, _ = _cli(capsys, "runs", "list", "--store", str(root), "--json")
    assert code == 0 and json.loads(out)[0]["status"] == "interrupted"
    code, out, _ = _cli(capsys, "runs", "show", "r", "--store", str(root), "--json")
    assert code == 0 and json.loads(out)["run"]["status"] == "interrupted"
    code, out, _ = _cli(capsys, "runs", "show", "r", "--store", str(root))
    assert code == 0 and "(sweep, interrupted, started" in out
    assert f"'marketcast sweep {spec} --resume --run-id r' computes the cells left" in " ".join(out.split())
    with store.lock("r"):  # the lock is free: a resume takes it at once
        pass


class _RefusingRay:
    """Ray's API as far as the sweep reaches it before any cell: the cluster refuses the connection."""

    def is_initialized(self) -> bool:
        return False

    def init(self, **kwargs):
        raise ConnectionError(f"could not connect to the GCS at {kwargs.get('address')}: connection refused")


def test_a_refused_ray_connection_leaves_no_run(tmp_path, capsys, monkeypatch):
    from marketcast.sweep import runner
    from tests.sweep.helpers import small_spec, write_bars

    write_bars(tmp_path / "bars", ["S0"], n=60)
    spec = tmp_path / "spec.toml"
    spec.write_text(small_spec())
    monkeypatch.setattr(runner, "import_ray", lambda: _RefusingRay())
    root = tmp_path / "runs"
    with socket.socket() as listener:  # answers TCP (the address check before Ray passes), but is no Ray
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        code, _, err = _cli(capsys, "sweep", str(spec), "--store", str(root), "--address", address)
    assert code == 6 and f"cannot start or reach the Ray cluster at {address}" in err, err
    assert not root.exists() or list(root.iterdir()) == []  # no run.json, no folder, no lock


# --- damage found by reading the files ------------------------------------------------------------------------

def _garble_pages(path: Path, seed: int = 1) -> None:
    """Random bytes over every data page of ``path``, its footer kept whole (pyarrow still reads its metadata)."""
    raw = bytearray(path.read_bytes())
    footer = pq.read_metadata(path).serialized_size + 8  # the footer, its length and the magic bytes
    rng = random.Random(seed)
    for i in range(4, len(raw) - footer):
        raw[i] = rng.randrange(256)
    path.write_bytes(bytes(raw))


def test_a_part_whose_pages_are_garbled_is_named_though_duckdb_does_not_name_it(tmp_path, capsys):
    root = tmp_path / "runs"
    store = RunStore(root)
    store.write_info("r", {"kind": "sweep", "created_at": "2030-01-01T00:00:00", "cells_total": 60})
    store.write_rows("r", [row for i in range(30) for row in _cell("r", i)])
    bad = store.write_rows("r", [row for i in range(30, 60) for row in _cell("r", i)])
    _garble_pages(bad)
    assert pq.read_metadata(bad).num_rows == 60  # the footer reads: only reading the pages finds the damage
    with pytest.raises(duckdb.Error) as raised:
        duckdb.connect().execute(f"SELECT symbol, max(record) FROM read_parquet('{bad}') GROUP BY symbol").fetchall()
    assert str(bad) not in str(raised.value) and bad.name not in str(raised.value)  # DuckDB does not name it

    code, out, err = _cli(capsys, "runs", "query", "SELECT symbol, count(*) AS n, max(record) AS r FROM cells "
                                                   "GROUP BY symbol ORDER BY symbol", "--store", str(root), "--json")
    assert code == 0 and [(r["symbol"], r["n"]) for r in json.loads(out)] == [("X", 10), ("Y", 10), ("Z", 10)]
    warned = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert len(warned) == 1 and str(bad) in warned[0] and "cannot be read as Parquet" in warned[0], err


def test_a_part_cut_short_is_found_by_its_footer_before_duckdb_reads_it(tmp_path):
    store = _retried_store(tmp_path / "runs")
    cut = store.parts("r")[-1]
    cut.write_bytes(cut.read_bytes()[:-20])  # the footer's end and the magic bytes gone
    with pytest.warns(StoreWarning) as caught:
        assert store.reader.usable(store.parts("r")) == store.parts("r")[:-1]
    assert len(caught) == 1 and str(cut) in str(caught[0].message)
    assert "Parquet magic bytes not found" in str(caught[0].message)  # pyarrow's reading, not DuckDB's text


# --- runs list is light; runs compare pages its FAIL rows -----------------------------------------------------

LIST = """
import json, sys
from marketcast.commands import main
code = main(["runs", "list", "--store", sys.argv[1], "--json"])
heavy = sorted(m for m in sys.modules if m.split(".")[0] == "pandas" or m.startswith("marketcast.backtest"))
print(json.dumps({"code": code, "heavy": heavy}))
"""


def test_runs_list_imports_neither_pandas_nor_the_backtest(tmp_path):
    store = _retried_store(tmp_path / "runs")
    store.write_info("planned", {"kind": "sweep", "created_at": "2030-01-02T00:00:00", "cells_total": 2,
                                 "status": "planned"})
    assert not (tmp_path / "runs" / "r" / "summary.json").exists()  # counted by DuckDB, not from a summary
    done = subprocess.run([sys.executable, "-c", LIST, str(tmp_path / "runs")], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    listing, report = done.stdout.rsplit("\n", 2)[0], json.loads(done.stdout.splitlines()[-1])
    assert report == {"code": 0, "heavy": []}
    rows = {r["run_id"]: (r["ok"], r["failed"], r["symbols"], r["status"]) for r in json.loads(listing)}
    assert rows == {"r": (30, 0, 3, "done"), "planned": (0, 0, 0, "planned")}


def _fails(root: Path, cells: int) -> None:
    """Runs a and b of ``cells`` cells; b's simple return is 0.1 above a's in every cell (a FAIL each)."""
    store = RunStore(root)
    for run, shift in (("a", 0.0), ("b", 0.1)):
        store.write_info(run, {"kind": "backtest", "created_at": f"2030-01-01T00:00:0{run == 'b':d}",
                               "cells_total": cells})
        rows = [{**row, "return": row["return"] + shift if row["strategy"] else None}
                for i in range(cells) for row in _cell(run, i)]
        store.write_rows(run, [{**row, "symbol": f"S{row['cell_index']:03d}"} for row in rows])


def test_runs_compare_lists_the_first_fail_rows_and_counts_them_all(tmp_path, capsys):
    root = tmp_path / "runs"
    _fails(root, 60)
    code, out, _ = _cli(capsys, "runs", "compare", "a", "b", "--store", str(root), "--json")
    result = json.loads(out)
    assert code == 1 and result["counts"] == {"PASS": 0, "WARN": 0, "FAIL": 60}
    assert len(result["rows"]) == 50 and result["rows_not_listed"] == 10
    assert [r["symbol"] for r in result["rows"]] == [f"S{i:03d}" for i in range(50)]  # plan order
    assert "60 FAIL and WARN rows (60 FAIL, 0 WARN) in all; the first 50 listed (--limit N lists more)" in \
        result["notes"]
    code, out, _ = _cli(capsys, "runs", "compare", "a", "b", "--store", str(root), "--json", "--limit", "7")
    result = json.loads(out)
    assert len(result["rows"]) == 7 and result["rows_not_listed"] == 53
    code, out, _ = _cli(capsys, "runs", "compare", "a", "b", "--store", str(root), "--json", "--all")
    assert len(json.loads(out)["rows"]) == 60 and json.loads(out)["rows_not_listed"] == 0
    code, out, _ = _cli(capsys, "runs", "compare", "a", "b", "--store", str(root))
    assert code == 1 and "note: 60 FAIL and WARN rows (60 FAIL, 0 WARN) in all; the first 50 listed" in out
