"""``runs compare``: any two runs, cell by cell and strategy by strategy, judged like ``compile compare``.

Cells are matched on the symbol and on every setting that varies within either run (a sweep's axes). The
settings that are constant in each run but differ between them (``fee 0.001 vs 0.002``, the model, the
compile mode) are listed first: the two runs were *meant* to differ there, so their deltas are what the
change did, and the verdict is ``SETTINGS DIFFER`` (exit 0; ``strict``: FAIL). With the same settings,
results that differ are a FAIL: per strategy a return delta > 0.05 FAIL, > 0.01 WARN
(:func:`marketcast.compile.compare.status_for`), and a strategy of both runs whose return is NaN (or missing)
in either, or whose Sharpe ratio is NaN in one run only, is a FAIL too: a run that lost a number differs
from one that has it, however small the other deltas.

Everything is joined and judged in DuckDB (a hash join on the cell key, then on the strategy): only the
counts, the rows shown (the non-PASS ones when there are more than ``shown`` rows, every row with
``show_all``) and a few notes come to Python, so the time and memory do not grow with the cells that pass.
"""

from __future__ import annotations

import json

import pandas as pd

from marketcast.compile.compare import FAIL_ABOVE, ORDER, WARN_ABOVE
from marketcast.errors import ConfigError
from marketcast.runs.cells import setting_names
from marketcast.runs.store import RunStore
from marketcast.runs.overview import label, plain, run_axes

SETTINGS_DIFFER = "SETTINGS DIFFER"
MAX_NOTES = 20  # notes of one kind (failed cells, cells in one run only) listed before '... and N more'
LIMIT = 50  # FAIL and WARN rows listed (runs compare --limit) when PASS rows are hidden


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _finite(expr: str) -> str:
    """``expr`` as a DOUBLE, NULL where it is NaN, infinite or missing (``compile compare``'s ``_number``)."""
    return f"CASE WHEN isfinite(TRY_CAST({expr} AS DOUBLE)) THEN TRY_CAST({expr} AS DOUBLE) END"


def _text(value) -> str:
    value = plain(value)
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def settings_differ(store: RunStore, run_a: str, run_b: str, axes: list[str], columns: list[str]) -> list[dict]:
    """``[{setting, a, b}]``: the settings constant within each run whose values differ between them."""
    names = [n for n in setting_names() if n in columns and n not in axes]
    if not names:
        return []
    listing = ", ".join(f"first({_q(n)}) AS {_q(n)}" for n in names)
    found = store.query(f"SELECT run_id, {listing} FROM cells GROUP BY run_id", run_ids=[run_a, run_b])
    by_run = {row["run_id"]: row for row in found.to_dict("records")}
    out = []
    for n in names:
        va, vb = plain(by_run[run_a][n]), plain(by_run[run_b][n])
        if json.dumps(va, default=str) != json.dumps(vb, default=str):
            out.append({"setting": n, "a": va, "b": vb})
    return out


def _capped(lines: list[str], total: int, what: str) -> list[str]:
    return lines + ([f"... and {total - len(lines)} more {what}"] if total > len(lines) else [])


def compare_runs(store: RunStore, run_a: str, run_b: str, *, strict: bool = False, show_all: bool = False,
                 shown: int = 40, limit: int = LIMIT) -> dict:
    """``compile compare``'s result for two runs of the store (rows, metric deltas, notes, status), plus
    ``settings`` (what differs), ``results`` (the worst row), ``counts`` (rows per status),
    ``rows_hidden`` (PASS rows left out: all rows are listed up to ``shown`` rows, or with ``show_all``) and
    ``rows_not_listed`` (FAIL and WARN rows past the first ``limit`` listed, when PASS rows are hidden: 8,000
    FAIL rows drawn one by one took seconds, and their count says as much)."""
    runs = list(dict.fromkeys([run_a, run_b]))  # a run against itself: its files once
    counts = store.query("SELECT run_id, count(*) AS n, count(*) FILTER (WHERE status = 'ok') AS ok FROM cells "
                         "GROUP BY run_id", run_ids=runs).set_index("run_id")
    for run in runs:
        if run not in counts.index:
            raise ConfigError(f"run {run} has no finished cells yet; nothing to compare")
    frame = store.query("SELECT * FROM rows LIMIT 0", run_ids=runs)
    columns = list(frame.columns)
    names = run_axes(store, runs)
    keys = ["symbol", *names]
    params = {"a": run_a, "b": run_b}
    has_results = {"strategy", "return", "sharpe"} <= set(columns)
    failed_notes = []
    for run in [run_a, run_b]:
        total = int(counts.loc[run, "n"]) - int(counts.loc[run, "ok"])
        if total:
            found = store.query(f"SELECT {', '.join(map(_q, keys))}, error FROM cells WHERE run_id = $run AND "
                                f"status <> 'ok' ORDER BY cell_index LIMIT {MAX_NOTES}", {"run": run}, run_ids=runs)
            failed_notes += _capped([f"{label(c, names)}: failed in {run}: {c['error']}"
                                     for c in found.to_dict("records")], total, f"failed cells in {run}")
    for run in runs:
        if not int(counts.loc[run, "ok"]) or not has_results:
            raise ConfigError(f"run {run} has no successful cells; nothing to compare")
    key_list = ", ".join(map(_q, keys))
    twice = store.query(f"SELECT run_id, {key_list} FROM cells WHERE status = 'ok' GROUP BY run_id, {key_list} "
                        "HAVING count(*) > 1 LIMIT 1", run_ids=runs)
    if len(twice):
        raise ConfigError(f"run {twice['run_id'][0]} holds two cells {label(twice.iloc[0], names)!r}; nothing "
                          "tells them apart")
    on = " AND ".join(f"ca.{_q(k)} IS NOT DISTINCT FROM cb.{_q(k)}" for k in keys)
    # a cell's strategies in the order the backtest wrote them: its ``strategies`` list, else the rows' order
    listed = "strategies" in columns
    position = ("list_position(strategies, strategy)" if listed else
                "row_number() OVER (PARTITION BY cell_id ORDER BY seq)")
    base = f"""
WITH ok AS MATERIALIZED (SELECT cell_id, cell_index, run_id, {key_list} FROM cells WHERE status = 'ok'),
ca AS (SELECT * FROM ok WHERE run_id = $a), cb AS (SELECT * FROM ok WHERE run_id = $b),
m AS MATERIALIZED (SELECT ca.cell_id AS ida, cb.cell_id AS idb, ca.cell_index AS ia FROM ca JOIN cb ON {on}),
r AS (SELECT run_id, cell_id, strategy, {_finite('"return"')} AS ret, {_finite('sharpe')} AS sh,
             {'strategies' if listed else 'row_number() OVER () AS seq'} FROM results),
ra AS (SELECT *, {position} AS pos FROM r WHERE run_id = $a),
rb AS (SELECT *, {position} AS pos FROM r WHERE run_id = $b),
s AS (SELECT m.*, ra.strategy FROM m JOIN ra ON ra.cell_id = m.ida
      UNION SELECT m.*, rb.strategy FROM m JOIN rb ON rb.cell_id = m.idb),
j AS (SELECT s.ida, s.idb, s.ia, s.strategy, ra.pos AS pa, rb.pos AS pb, ra.cell_id IS NOT NULL AS in_a,
             rb.cell_id IS NOT NULL AS in_b, ra.ret AS return_a, rb.ret AS return_b, rb.ret - ra.ret AS return_delta,
             ra.sh AS sharpe_a, rb.sh AS sharpe_b, rb.sh - ra.sh AS sharpe_delta
      FROM s LEFT JOIN ra ON ra.cell_id = s.ida AND ra.strategy = s.strategy
             LEFT JOIN rb ON rb.cell_id = s.idb AND rb.strategy = s.strategy),
judged AS MATERIALIZED (SELECT *, CASE WHEN return_delta IS NULL AND NOT (in_a AND in_b) THEN 'WARN'
                          WHEN return_a IS NULL OR return_b IS NULL OR (sharpe_a IS NULL) <> (sharpe_b IS NULL)
                               THEN 'FAIL'
                          WHEN abs(return_delta) > {FAIL_ABOVE!r}::DOUBLE THEN 'FAIL'
                          WHEN abs(return_delta) > {WARN_ABOVE!r}::DOUBLE THEN 'WARN' ELSE 'PASS' END AS status
           FROM j)
"""
    # one pass of the joins for every count (the CTEs above are materialised once within a query)
    tally = store.query(base + "SELECT 'status' AS kind, status AS what, count(*) AS n FROM judged GROUP BY status "
                        "UNION ALL SELECT 'only', 'A', count(*) FROM ca WHERE cell_id NOT IN (SELECT ida FROM m) "
                        "UNION ALL SELECT 'only', 'B', count(*) FROM cb WHERE cell_id NOT IN (SELECT idb FROM m) "
                        "UNION ALL SELECT 'matched', '', count(*) FROM m", params, run_ids=runs)
    found = {(k, w): int(n) for k, w, n in zip(tally["kind"], tally["what"], tally["n"])}
    per_status = {s: 0 for s in ORDER} | {w: n for (k, w), n in found.items() if k == "status"}
    rows_total = sum(per_status.values())
    only = {side: found[("only", side)] for side in "AB"}
    if not found[("matched", "")]:
        raise ConfigError(f"runs {run_a} and {run_b} have no cell in common (matched on symbol"
                          f"{''.join(', ' + n for n in names)}); nothing to compare")
    hide = not show_all and rows_total > shown
    where, cap = ("WHERE status <> 'PASS'", f"LIMIT {int(limit)}") if hide else ("", "")
    picked = store.query(base + f"SELECT judged.*, {', '.join(f'ca.{_q(k)}' for k in keys)} FROM judged "
                         f"JOIN ca ON ca.cell_id = judged.ida {where} "
                         f"ORDER BY ia, pa NULLS LAST, pb NULLS LAST, strategy {cap}", params, run_ids=runs)
    judged_rows = rows_total - per_status["PASS"] if hide else len(picked)
    cell_notes = []
    for side, table, other in (("A", "ca", "ida"), ("B", "cb", "idb")):
        total = int(only[side])
        if total:
            found = store.query(base + f"SELECT {key_list} FROM {table} WHERE cell_id NOT IN (SELECT {other} FROM m) "
                                f"ORDER BY cell_index LIMIT {MAX_NOTES}", params, run_ids=runs)
            cell_notes += _capped([f"{label(c, names)}: only in {side}" for c in found.to_dict("records")], total,
                                  f"cells only in {side}")
    labels = {r["ida"]: (r["idb"], label(r, names))  # one label a cell, not a row
              for r in picked.drop_duplicates("ida")[["ida", "idb", *keys]].to_dict("records")}
    numbers = ("return_a", "return_b", "return_delta", "sharpe_a", "sharpe_b", "sharpe_delta")
    values = picked[list(numbers)].astype(object).where(picked[list(numbers)].notna(), None)
    rows = [{"symbol": labels[ida][1], "strategy": strategy, **dict(zip(numbers, nums)), "status": status}
            for ida, strategy, status, nums in zip(picked["ida"], picked["strategy"], picked["status"],
                                                  values.itertuples(index=False, name=None))]
    strategy_notes, lost_notes = [], []
    for row, in_a, in_b in zip(rows, picked["in_a"], picked["in_b"]):
        if not (in_a and in_b):
            strategy_notes.append(f"{row['symbol']}: strategy {row['strategy']!r} only in {'A' if in_a else 'B'}")
            continue
        lost = [f"return is NaN in {side}" for side in "AB" if row[f"return_{side.lower()}"] is None]
        if (row["sharpe_a"] is None) != (row["sharpe_b"] is None):
            lost.append(f"sharpe is NaN in {'A' if row['sharpe_a'] is None else 'B'} only")
        if lost:
            lost_notes.append(f"{row['symbol']}: {row['strategy']}: {', '.join(lost)}")
    metric_deltas = _metric_deltas(store, [run_a, run_b], frame, labels)
    settings = settings_differ(store, run_a, run_b, names, columns)
    worst = max((s for s, n in per_status.items() if n), key=ORDER.__getitem__, default="PASS")
    status = worst if not settings else ("FAIL" if strict else SETTINGS_DIFFER)
    notes = []
    if settings:
        what = ", ".join(f"{s['setting']} {_text(s['a'])} vs {_text(s['b'])}" for s in settings)
        notes.append(f"settings differ: {what}: the deltas are what they change, not a failure"
                     f"{' (--strict: a FAIL)' if strict else ' (--strict makes it a FAIL)'}")
    notes += failed_notes + cell_notes + strategy_notes + lost_notes
    if hide:
        notes.append(f"{per_status['PASS']} PASS rows hidden (--all lists them)")
    if len(picked) < judged_rows:
        notes.append(f"{judged_rows} FAIL and WARN rows ({per_status['FAIL']} FAIL, {per_status['WARN']} WARN) in "
                     f"all; the first {len(picked)} listed (--limit N lists more)")
    return {"status": status, "results": worst, "thresholds": {"fail_above": FAIL_ABOVE, "warn_above": WARN_ABOVE},
            "settings": settings, "counts": per_status, "rows_hidden": per_status["PASS"] if hide else 0,
            "rows_not_listed": judged_rows - len(picked),
            "rows": rows, "metric_deltas": metric_deltas, "notes": notes, "runs": {"a": run_a, "b": run_b},
            "matched_on": keys}


def _metric_deltas(store: RunStore, runs: list[str], frame: pd.DataFrame, cells: dict) -> dict:
    """label -> metric -> B - A for the cells of the rows shown, where both runs have a finite number."""
    metrics = [c for c in frame.columns if c.startswith("metrics.") and pd.api.types.is_numeric_dtype(frame[c])
               and not pd.api.types.is_bool_dtype(frame[c])]
    out = {key: {} for _, key in cells.values()}
    if not metrics or not cells:
        return out
    ida = list(cells)
    idb = [cells[i][0] for i in ida]
    deltas = ", ".join(f"{_finite('b.' + _q(c))} - {_finite('a.' + _q(c))} AS {_q(c)}" for c in metrics)
    found = store.query(f"WITH pairs AS (SELECT unnest(?) AS ida, unnest(?) AS idb) SELECT pairs.ida, {deltas} "
                        "FROM pairs JOIN cells a ON a.cell_id = pairs.ida AND a.run_id = ? "
                        "JOIN cells b ON b.cell_id = pairs.idb AND b.run_id = ?", [ida, idb, *runs],
                        run_ids=list(dict.fromkeys(runs)))
    short = [c.removeprefix("metrics.") for c in metrics]
    values = found[metrics].astype(object).where(found[metrics].notna(), None)
    for ida, row in zip(found["ida"], values.itertuples(index=False, name=None)):
        out[cells[ida][1]] = {n: v for n, v in zip(short, row) if v is not None}
    return out
