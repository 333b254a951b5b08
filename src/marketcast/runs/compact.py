"""Compaction of a run: its parts merged into a few sorted files, swapped in by a new ``manifest.json``. It
lives apart from writing parts (:mod:`marketcast.runs.write`) because it is the one step that replaces files,
and its crash safety is in the order of that step alone.

:func:`compact` merges a run's live files into a few ``compact-<generation>-<n>.parquet`` files (about 128 MB,
1M rows or 768 MB of cell records each, sorted by symbol and strategy, in 2 GB of memory) while holding the
run's lock, and then swaps in ``manifest.json`` (``{"generation", "files", "absorbed"}``, written atomically).
Readers (:mod:`marketcast.runs.read`) take a run's live files from the manifest, so a compaction killed at any
point (SIGKILL included) leaves every cell readable exactly once; its leftovers (compacted files the manifest
does not list, parts it absorbed, DuckDB's spill folder) are removed by the next compaction. A sweep compacts
its run when it finishes.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from marketcast.errors import StateError
from marketcast.fileio import write_atomic, write_files
from marketcast.runs.read import COMPACT_GLOB, MANIFEST, PART_GLOB, duckdb_module, sql_text
from marketcast.runs.write import StoreWriter

SPILL = "compact-spill"  # DuckDB's spill folder while sorting
COMPACT_ROWS = 1_000_000  # a compacted file holds about this many rows at most
COMPACT_BYTES = 128 * 2**20  # ... or about this many bytes of the parts it replaces
COMPACT_MEMORY = "2GB"  # DuckDB's memory while compacting (the end of every sweep): flat in the run's size
# ... and the cell records are sorted in that memory one bucket (a range of symbols) at a time, each holding at
# most this many bytes of them: 763 MB of records (10,000 real 70-window cells) in one sort ran out of 2 GB;
# one sort of 3.4 GB spilled for minutes. A file holds several buckets in order (files_of)
COMPACT_SORT_BYTES = 256 * 2**20
ROW_GROUP = 100_000  # rows a Parquet row group holds at most in a compacted file
FOLD_PARTS = 64  # a running sweep folds its parts into one compacted file every this many parts (fold)


def buckets(counts: list[tuple], n: int) -> list[str]:
    """``n`` (at most) WHERE clauses splitting ``(symbol, rows)`` (sorted) into runs of symbols of about equal rows."""
    total, out, start, taken = sum(c for _, c in counts), [], 0, 0
    for i, (_, c) in enumerate(counts):
        taken += c
        last = i == len(counts) - 1
        if last or (len(out) < n - 1 and taken >= total * (len(out) + 1) / n):
            lo, hi = counts[start][0], counts[i][0]
            if hi is None:  # NULL sorts last: the last bucket takes it
                lo_sql = f"symbol >= {sql_text(lo)} OR " if lo is not None else ""
                out.append(f"({lo_sql}symbol IS NULL)")
            else:
                out.append(f"symbol BETWEEN {sql_text(lo)} AND {sql_text(hi)}")
            start = i + 1
    return out


def files_of(wheres: list[str], n: int) -> list[list[str]]:
    """The sort buckets ``wheres`` (symbol ranges, in order) shared out in order among at most ``n`` files:
    a bucket is what one sort holds in memory, a file as many buckets as its share of the rows and bytes."""
    n = min(n, len(wheres))
    return [wheres[len(wheres) * i // n:len(wheres) * (i + 1) // n] for i in range(n)]


def _collect(folder: Path, manifest: dict | None) -> None:
    """Remove what no reader reads: absorbed parts, compacted files the manifest does not list, spill."""
    shutil.rmtree(folder / SPILL, ignore_errors=True)
    listed = set(manifest["files"]) if manifest else set()
    for path in folder.glob(COMPACT_GLOB):
        if path.name not in listed:
            path.unlink(missing_ok=True)
    for name in manifest["absorbed"] if manifest else ():
        (folder / name).unlink(missing_ok=True)


def compact(writer: StoreWriter, run_id: str, keep_parts: bool = False) -> dict:
    """Merge the run's live files into a few sorted ones and swap in a new manifest, holding the run's lock;
    then delete the files it replaced (``keep_parts``: keep the parts, which readers then ignore). Returns
    ``{"files_before", "files_after", "rows"}``; a run already compact (one file per bucket, no new part, not
    folded) is left as it is."""
    with writer.lock(run_id):
        return _merge(writer, run_id, keep_parts, fold_only=False)


def fold(writer: StoreWriter, run_id: str) -> dict:
    """Merge the run's parts (not its compacted files) into one more compacted file, listed by a new manifest
    marked ``folded``: what a running sweep does every :data:`FOLD_PARTS` parts, so a run being written (or
    interrupted) is read from a few files, not thousands of parts. The caller holds the run's lock (the sweep
    does); the same steps as :func:`compact`, so a fold killed at any point is as safe. Each fold reads only the
    new parts: folding a whole run costs one pass over it, and :func:`compact` merges the folded files at the end."""
    return _merge(writer, run_id, keep_parts=False, fold_only=True)


def _merge(writer: StoreWriter, run_id: str, keep_parts: bool, fold_only: bool) -> dict:
    duckdb = duckdb_module()
    reader = writer.reader
    folder = Path(os.path.abspath(reader.run_dir(run_id)))
    manifest = reader.manifest(folder)
    if manifest is None and (folder / MANIFEST).exists():
        raise StateError(f"{folder / MANIFEST} is damaged; restore it or move the run away before compacting")
    if not keep_parts:
        _collect(folder, manifest)
    else:
        shutil.rmtree(folder / SPILL, ignore_errors=True)
    live = reader.usable(reader.live(folder))
    fresh = [p for p in live if p.name.startswith("part-")]
    if not live or (manifest is not None and not fresh and (fold_only or not manifest.get("folded"))):
        if live and not fold_only and not reader.summaries([run_id]):
            writer.write_summary(run_id)
        return {"files_before": len(live), "files_after": len(live), "rows": None}
    merged = fresh if fold_only else live
    size = sum(p.stat().st_size for p in merged)
    con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False,
                                             "autoload_known_extensions": False})
    try:
        con.execute(f"SET temp_directory = {sql_text(str(folder / SPILL))}")
        con.execute(f"SET memory_limit = '{COMPACT_MEMORY}'")  # sorting spills there beyond this
        source = f"read_parquet([{', '.join(sql_text(str(p)) for p in merged)}], union_by_name = true)"
        has_record = "record" in [d[0] for d in con.execute(f"SELECT * FROM {source} LIMIT 0").description]
        found = con.execute(f"SELECT symbol, count(*), {'sum(strlen(record))' if has_record else '0'} "
                            f"FROM {source} GROUP BY symbol ORDER BY symbol NULLS LAST").fetchall()
        counts = [(symbol, n) for symbol, n, _ in found]
        rows, records = sum(n for _, n in counts), sum(b or 0 for _, _, b in found)
        wheres = buckets(counts, max(1, -(-rows // COMPACT_ROWS), -(-size // COMPACT_BYTES),
                                     -(-records // COMPACT_SORT_BYTES)))
        files = files_of(wheres, max(1, -(-rows // COMPACT_ROWS), -(-size // COMPACT_BYTES)))
        generation = (manifest["generation"] if manifest else 0) + 1
        names = [f"compact-{generation:06d}-{i:03d}.parquet" for i in range(len(files))]

        def copy(group: list[str]):
            def write(tmp: Path) -> None:
                import pyarrow.parquet as pq

                out = None
                try:
                    for where in group:  # symbol ranges in order: the file is sorted as a whole
                        batches = con.sql(f"SELECT * FROM {source} WHERE {where} ORDER BY symbol, strategy "
                                          "NULLS FIRST, cell_index").to_arrow_reader(ROW_GROUP)
                        for batch in batches:
                            out = out or pq.ParquetWriter(tmp, batch.schema, compression="zstd")
                            out.write_batch(batch)
                finally:
                    if out is not None:
                        out.close()
            return write

        write_files(folder, {name: copy(group) for name, group in zip(names, files)}, StateError)
    finally:
        con.close()
        shutil.rmtree(folder / SPILL, ignore_errors=True)
    kept = set(manifest["absorbed"]) if manifest else set()
    absorbed = sorted({p.name for p in fresh} | {p.name for p in folder.glob(PART_GLOB) if p.name in kept})
    new = {"generation": generation, "files": names, "absorbed": absorbed}
    if fold_only:
        new = {**new, "files": [*(manifest["files"] if manifest else []), *names], "folded": True}
    write_atomic(folder / MANIFEST, lambda tmp: tmp.write_text(json.dumps(new, indent=1) + "\n"), StateError)
    if not keep_parts:
        _collect(folder, new)
    if not fold_only:
        writer.write_summary(run_id)
    return {"files_before": len(live), "files_after": len(new["files"]), "rows": rows}
