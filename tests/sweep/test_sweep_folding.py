"""A running sweep folds its parts every ``fold_parts`` parts (:func:`marketcast.runs.compact.fold`): the run
never holds more than that many parts while it is written, and it reads the same as a sweep that never folds."""

from __future__ import annotations

from marketcast.commands import main
from marketcast.runs.read import PART_GLOB
from marketcast.runs.store import RunStore

from .helpers import small_spec, write_bars

GRID = 'seed = [0, 1, 2, 3, 4]'  # 2 symbols x 2 fill modes x 5 seeds: 20 cells, a part per forecast job (2 cells)


def _sweep(tmp_path, name: str, fold_parts: int, monkeypatch) -> tuple[RunStore, list[int]]:
    (tmp_path / f"{name}.toml").write_text(small_spec(grid=GRID, tail=f"[ray]\nflush_cells = 1\n"
                                                                      f"fold_parts = {fold_parts}\n"))
    store = RunStore(tmp_path / name)
    seen: list[int] = []  # live parts of the run after each part the driver writes
    cells: list[int] = []  # ... and the cells it reads then
    write_rows = RunStore.write_rows

    def counting(self, run_id, rows):
        path = write_rows(self, run_id, rows)
        seen.append(len([p for p in self.reader.live(self.run_dir(run_id)) if p.match(PART_GLOB)]))
        cells.append(int(self.query("SELECT count(*) AS n FROM cells", run_ids=[run_id])["n"][0]))
        return path

    monkeypatch.setattr(RunStore, "write_rows", counting)
    assert main(["sweep", str(tmp_path / f"{name}.toml"), "--local", "--store", str(store.root)]) == 0
    monkeypatch.undo()
    assert cells == list(range(2, 22, 2))  # every cell read once while the parts are folded
    return store, seen


def test_a_sweep_folds_its_parts_as_it_goes_and_reads_the_same(tmp_path, monkeypatch):
    write_bars(tmp_path / "bars", ["AAA", "BBB"])
    folded, seen = _sweep(tmp_path, "folded", 3, monkeypatch)
    plain, seen_plain = _sweep(tmp_path, "plain", 1000, monkeypatch)
    assert seen == [1, 2, 3] * 3 + [1]  # counted as each part lands; the third is folded with the two before it
    assert seen_plain == list(range(1, 11))  # without folding every part stays until the end
    sql = ("SELECT symbol, fill_mode, seed, strategy, status, \"metrics.mase\" AS mase, \"return\", "
           "record IS NOT NULL AS has_record FROM all_rows ORDER BY symbol, fill_mode, seed, strategy NULLS FIRST")
    a, b = (s.query(sql, run_ids=s.run_ids()) for s in (folded, plain))
    assert len(a) == 20 * 9 and a.equals(b)  # (a record holds its run's timings: its presence is compared)
