"""A finished sweep is compacted (a few ``compact-*`` files behind a manifest, no part left), ``runs list``
reads its counts from the summary that compaction writes, and a resume after compaction adds its parts beside
the compacted files, retries, and is compacted again with every attempt kept."""

from __future__ import annotations

import json

from marketcast.commands import main
from marketcast.runs.overview import list_runs
from marketcast.runs.read import MANIFEST, SUMMARY
from marketcast.runs.store import RunStore

from .helpers import small_spec, write_bars

SPEC = small_spec(data='symbols = ["AAA", "BBB", "LATE"]')


def _files(folder):
    return sorted(p.name.split("-")[0] for p in folder.glob("*.parquet"))


def test_a_finished_sweep_is_compacted_and_resumes_after_compaction(tmp_path, capsys):
    write_bars(tmp_path / "bars", ["AAA", "BBB"])
    (tmp_path / "spec.toml").write_text(SPEC)
    spec, store = str(tmp_path / "spec.toml"), RunStore(tmp_path / "store")
    assert main(["sweep", spec, "--local", "--store", str(store.root)]) == 1  # LATE has no bars yet
    assert "6 cells, 4 ok, 2 failed" in capsys.readouterr().out
    (run,) = store.run_ids()
    folder = store.run_dir(run)
    assert _files(folder) == ["compact"] and json.loads((folder / MANIFEST).read_text())["generation"] == 1
    summary = json.loads((folder / SUMMARY).read_text())
    assert (summary["ok"], summary["failed"], summary["symbols"], summary["models"]) == (4, 2, 3, "baseline")
    assert store.summaries([run])[run] == {"ok": 4, "failed": 2, "symbols": 3, "models": "baseline"}

    write_bars(tmp_path / "late", ["LATE"])
    (tmp_path / "late" / "LATE.csv").rename(tmp_path / "bars" / "LATE.csv")
    assert main(["sweep", spec, "--local", "--store", str(store.root), "--resume", "--retry-failed", "1"]) == 0
    assert "6 cells, 6 ok, 0 failed, 4 from before the resume, 2 failed attempts retried" in capsys.readouterr().out
    assert _files(folder) == ["compact"] and json.loads((folder / MANIFEST).read_text())["generation"] == 2
    assert store.query("SELECT count(*) AS n FROM cells WHERE status = 'ok'", run_ids=[run])["n"][0] == 6
    history = store.query("SELECT status, count(*) AS n FROM all_rows WHERE strategy IS NULL GROUP BY status "
                          "ORDER BY status", run_ids=[run])
    assert history.to_dict("records") == [{"status": "error", "n": 2}, {"status": "ok", "n": 6}]
    listed = list_runs(store).set_index("run_id").loc[run]
    assert (listed["ok"], listed["failed"], listed["status"]) == (6, 0, "done")
