"""What the ``runs`` commands (and a sweep's last lines) tell of the store, built on its read-only queries
(:mod:`marketcast.runs.read`): the list of runs, a run's cells and grid axes, its per-strategy table, the
multiple-testing figures across its cells and each cell as ``runs show`` tells it."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from marketcast.errors import ConfigError
from marketcast.runs.cells import setting_names
from marketcast.runs.listing import COLUMNS, list_rows
from marketcast.runs.store import RunStore

SHOWN_METRICS = ("return", "sharpe", "max_drawdown")
WF_RETURNS = "walk_forward.returns"
MAX_PBO_CELLS = 200  # CSCV over more cells holds C(16, 8) x 2N sums in memory: PBO is n/a above this
MAX_SYMBOL_LINES = 20  # per-symbol PBO (one query each) and per-symbol lines on screen up to this many symbols


def plain(value):
    """A pandas/numpy cell as a plain Python value (lists for arrays, None for NaN)."""
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return value


def _key(value) -> str:
    return json.dumps(plain(value), default=str)


def list_runs(store: RunStore) -> pd.DataFrame:
    """:func:`marketcast.runs.listing.list_rows` as a frame."""
    return pd.DataFrame(list_rows(store), columns=list(COLUMNS))


def cells(store: RunStore, run_id: str) -> pd.DataFrame:
    """The cell rows of a run (without their records and walk-forward returns), in plan order."""
    columns = [c for c in store.columns([run_id]) if c not in ("record", WF_RETURNS)]
    listing = ", ".join(f'"{c}"' for c in columns)
    return store.query(f"SELECT {listing} FROM cells ORDER BY cell_index", run_ids=[run_id])


def cell_counts(store: RunStore, run_id: str) -> tuple[int, int, pd.DataFrame]:
    """``(cells, cells ok, the failed cells' symbol, cell_id and error in plan order)``, counted in DuckDB."""
    total, ok = store.query("SELECT count(*) AS n, count(*) FILTER (WHERE status = 'ok') AS ok FROM cells",
                            run_ids=[run_id]).iloc[0]
    if "error" not in store.columns([run_id]):
        return int(total), int(ok), pd.DataFrame(columns=["symbol", "cell_id", "error"])
    failed = store.query("SELECT symbol, cell_id, error FROM cells WHERE status <> 'ok' ORDER BY cell_index",
                         run_ids=[run_id])
    return int(total), int(ok), failed


def axes(frames: list[pd.DataFrame]) -> list[str]:
    """The settings that take more than one value within any of ``frames`` (the grid's axes)."""
    out = []
    for name in setting_names():
        if any(name in f and f[name].map(_key).nunique() > 1 for f in frames):
            out.append(name)
    return out


def run_axes(store: RunStore, run_ids: list[str]) -> list[str]:
    """:func:`axes` of the runs' cells, counted in DuckDB (NULL is a value, as in :func:`axes`). Counted once
    per set of live files: ``runs show`` asks three times (the summary, the selection, the cell records), and
    each count reads every cell (1.2 s at 100,000 cells)."""
    key = (tuple(run_ids), *(repr(store.reader.files_key(r)) for r in run_ids))
    memo = store.reader.axes
    if key not in memo:
        memo[key] = _count_axes(store, run_ids)
    return list(memo[key])


def _count_axes(store: RunStore, run_ids: list[str]) -> list[str]:
    columns = set(store.columns(run_ids))
    names = [n for n in setting_names() if n in columns]
    if not names:
        return []
    counts = ", ".join(f'count(DISTINCT "{n}") + max(("{n}" IS NULL)::INTEGER) AS "{n}"' for n in names)
    found = store.query(f"SELECT {counts} FROM cells GROUP BY run_id", run_ids=run_ids)
    return [n for n in names if (found[n] > 1).any()]


def strategy_order(columns, table: str = "") -> str:
    """SQL ordering a cell's strategy rows as the backtest wrote them (the order of its ``strategies``)."""
    t = f"{table}." if table else ""
    return (f"list_position({t}strategies, {t}strategy) NULLS LAST, {t}strategy" if "strategies" in columns
            else f"{t}strategy")


def label(row: pd.Series, names: list[str], with_symbol: bool = True) -> str:
    """``SP500 fill_mode=touch point=median``: a cell's symbol and its values on ``names``."""
    parts = [f"{n}={','.join(map(str, v)) if isinstance(v, list) else v}" for n in names for v in [plain(row.get(n))]]
    return " ".join([str(row["symbol"]), *parts] if with_symbol else parts)


def _number(column: str) -> str:
    value = f'TRY_CAST("{column}" AS DOUBLE)'
    return f"CASE WHEN isnan({value}) THEN NULL ELSE {value} END"


def summary(store: RunStore, run_id: str, by: list[str] | None = None,
            metrics: tuple[str, ...] = SHOWN_METRICS) -> pd.DataFrame:
    """Mean of ``metrics`` per group of ``by`` (default: the grid's axes, or the symbol in a run without
    axes) and strategy, with the number of cells in each group, grouped in DuckDB; groups come in the order
    of their first row (plan order, then the cell's strategy order)."""
    columns = store.columns([run_id])
    shown = [c for c in columns if c not in ("settle_times", "returns")]
    if "strategy" not in columns or store.query("SELECT 1 FROM results LIMIT 1", run_ids=[run_id]).empty:
        return pd.DataFrame()
    by = by if by is not None else (run_axes(store, [run_id]) or ["symbol"])
    missing = [c for c in [*by, *metrics] if c not in shown]
    if missing:
        raise ConfigError(f"run {run_id} has no column {', '.join(missing)}; choose from "
                          f"{', '.join(c for c in shown if c not in ('record',))}")
    keys = ", ".join(f'"{c}"' for c in dict.fromkeys([*by, "strategy"]))
    means = ", ".join(f'avg({_number(m)}) AS "{m}"' for m in metrics)
    position = "list_position(strategies, strategy)" if "strategies" in columns else "0"
    first = f"min(cell_index * 1000000 + coalesce({position}, 0))" if "cell_index" in columns else "0"
    table = store.query(f"SELECT {keys}, count(*) AS cells{', ' + means if means else ''} FROM results "
                        f"GROUP BY {keys} ORDER BY {first}, {keys}", run_ids=[run_id])
    for c in dict.fromkeys(by):
        table[c] = table[c].map(lambda v: _key(v) if isinstance(plain(v), list) else v)
    return table


# --- multiple testing across cells ------------------------------------------------------------------------

_TRIALS_SQL = """
WITH c AS (
    SELECT {scope} AS scope, cell_id, cell_index, "walk_forward.sharpe_per_period" AS sr,
           "walk_forward.observations" AS t, "walk_forward.skew" AS g3, "walk_forward.kurtosis" AS g4,
           "walk_forward.periods_per_year" AS ppy, hash(settle_times) AS windows_key
    FROM cells WHERE status = 'ok'),
g AS (
    SELECT scope, count(*) AS trials, count(sr) AS sharpes, avg(sr) AS sharpe_mean, var_samp(sr) AS sharpe_variance,
           count(DISTINCT windows_key) AS window_sets
    FROM c GROUP BY scope),
b AS (SELECT *, row_number() OVER (PARTITION BY scope ORDER BY sr DESC NULLS LAST, cell_index) AS k FROM c)
SELECT g.*, b.cell_id AS best_cell, b.sr AS best_sharpe, b.t AS observations, b.g3 AS skew, b.g4 AS kurtosis,
       b.ppy AS periods_per_year
FROM g JOIN b USING (scope) WHERE b.k = 1 ORDER BY scope
"""


def _finite_or_none(value) -> float | None:
    value = plain(value)
    return None if value is None else float(value)


def _cell_pbo(store: RunStore, run_id: str, symbol: str | None, trials: int, window_sets: int,
              symbols: int) -> dict:
    """PBO by CSCV (:func:`marketcast.backtest.overfit.cscv`) on the ``[windows, cells]`` matrix of the cells'
    walk-forward returns, with the default number of blocks; n/a (and why) when the cells' windows differ,
    there are too many cells to hold the split sums in memory, or (per symbol) too many symbols to query each."""
    from marketcast.backtest.overfit import cscv, default_splits

    if symbol is not None and symbols > MAX_SYMBOL_LINES:
        return {"pbo": None, "cscv_splits": None, "pbo_note": f"per symbol only up to {MAX_SYMBOL_LINES} symbols"}
    if trials < 2:
        return {"pbo": None, "cscv_splits": None, "pbo_note": "one cell"}
    if window_sets != 1:
        return {"pbo": None, "cscv_splits": None, "pbo_note": "the cells' windows differ"}
    if trials > MAX_PBO_CELLS:
        return {"pbo": None, "cscv_splits": None, "pbo_note": f"more than {MAX_PBO_CELLS} cells"}
    where, params = ("AND symbol = ?", [symbol]) if symbol is not None else ("", [])
    found = store.query(f'SELECT "{WF_RETURNS}" AS r FROM cells WHERE status = \'ok\' {where} ORDER BY cell_index',
                        params, run_ids=[run_id])
    matrix = np.array([np.asarray(r, dtype=np.float64) for r in found["r"]]).T  # [T windows, N cells]
    splits = default_splits(len(matrix))
    result = None if splits is None else cscv(matrix, splits)
    if result is None:
        return {"pbo": None, "cscv_splits": None,
                "pbo_note": "too few windows" if splits is None else "fewer than 2 cells vary"}
    return {"pbo": result.pbo, "cscv_splits": splits, "pbo_note": None}


def _rules(store: RunStore, run_id: str) -> dict:
    """Selection rules tried per scope ('run' and each symbol): the distinct ``selection`` settings
    (select_lookback, min_trades) of the finished cells; {} for a store without the column (one rule)."""
    if "selection" not in store.columns([run_id]):
        return {}
    found = store.query("SELECT 'run' AS scope, count(DISTINCT selection) AS n FROM cells WHERE status = 'ok' "
                        "UNION ALL SELECT symbol, count(DISTINCT selection) FROM cells WHERE status = 'ok' "
                        "GROUP BY symbol", run_ids=[run_id])
    return {row["scope"]: int(row["n"]) for row in found.to_dict("records")}


def selection(store: RunStore, run_id: str, symbols: int | None = None) -> list[dict]:
    """Multiple testing across a run's cells: every finished cell is a trial. For the whole run and, when
    it spans several symbols, for each symbol: the trial count, the best cell by its walk-forward record's
    Sharpe ratio (ties: the first in plan order), the Sharpe variance across the cells (per period) as V[SR],
    the best cell's deflated Sharpe ratio (:func:`marketcast.backtest.overfit.expected_max_sharpe` and
    :func:`~marketcast.backtest.overfit.deflated_sharpe`), PBO across the cells and the plain sentence when the
    best is not distinguishable from luck, and how many selection rules (``rules``) the cells tried: each cell's
    walk-forward record is one rule's, so the cell count the DSR deflates by includes them. Aggregated in
    DuckDB; only the best cell's moments and (for PBO,
    up to :data:`MAX_PBO_CELLS` cells) the walk-forward returns come to Python. Empty for a run recorded
    before the cells held their walk-forward record. ``symbols``: only the first that many symbols' figures
    (what the terminal shows; the run's figure says how many symbols there are), computed in SQL with a LIMIT
    instead of for every symbol of a 10,000-symbol run."""
    from marketcast.backtest.overfit import deflated_sharpe, expected_max_sharpe, luck_sentence

    if WF_RETURNS not in store.columns([run_id]):
        return []
    frames = [store.query(_TRIALS_SQL.format(scope="'run'"), run_ids=[run_id])]
    if frames[0].empty:
        return []
    limit = "" if symbols is None else f" LIMIT {int(symbols) + 1}"  # one more: several symbols or one
    by_symbol = store.query(_TRIALS_SQL.format(scope="symbol") + limit, run_ids=[run_id])
    total = len(by_symbol) if symbols is None or len(by_symbol) <= symbols else int(store.query(
        "SELECT count(DISTINCT symbol) AS n FROM cells WHERE status = 'ok'", run_ids=[run_id])["n"].iloc[0])
    if total > 1:
        frames.append(by_symbol.head(symbols) if symbols is not None else by_symbol)
    names = run_axes(store, [run_id])
    rules = _rules(store, run_id)
    best = sorted({c for frame in frames for c in frame["best_cell"]})
    listing = ", ".join(f'"{c}"' for c in dict.fromkeys(["cell_id", "symbol", *names]))
    found = store.query(f"SELECT {listing} FROM cells WHERE list_contains(?, cell_id)", [best],
                        run_ids=[run_id]).set_index("cell_id")
    out = []
    for frame in frames:
        for row in frame.to_dict("records"):
            trials, sharpes = int(row["trials"]), int(row["sharpes"])
            variance = _finite_or_none(row["sharpe_variance"]) if sharpes > 1 else (0.0 if trials == 1 else None)
            best = _finite_or_none(row["best_sharpe"])
            ppy = _finite_or_none(row["periods_per_year"])
            sr0 = None if variance is None else expected_max_sharpe(trials, variance)
            dsr = None if sr0 is None or best is None else deflated_sharpe(
                best, int(row["observations"]), float(row["skew"]), float(row["kurtosis"]), sr0)
            symbol = None if frame is frames[0] else row["scope"]
            pbo = _cell_pbo(store, run_id, symbol, trials, int(row["window_sets"]), total)
            cell = found.loc[row["best_cell"]]
            out.append({
                "scope": "run" if symbol is None else symbol, "trials": trials, "cells_with_sharpe": sharpes,
                "sharpe_mean": _finite_or_none(row["sharpe_mean"]), "sharpe_variance": variance,
                "expected_max_sharpe": sr0,
                "best_cell": row["best_cell"], "best_label": label(cell, names),
                "best_sharpe": best, "best_sharpe_annualised": None if best is None or ppy is None
                else best * float(np.sqrt(ppy)), "observations": int(row["observations"]),
                "dsr": dsr, **pbo, "rules": rules.get("run" if symbol is None else symbol, 1),
                "verdict": luck_sentence(trials, "cells", dsr, pbo["pbo"]),
                **({"symbols": total} if symbol is None else {}),
            })
    return out


def selection_lines(figures: list[dict]) -> list[str]:
    """:func:`selection` in plain lines: one per scope (the run, then up to :data:`MAX_SYMBOL_LINES` symbols),
    then each plain sentence of those."""
    fmt = lambda x, spec="+.3f": "—" if x is None else format(x, spec)  # noqa: E731
    shown = max(0, len(figures) - 1)  # per-symbol figures (none for a run of one symbol)
    lines, hidden = [], max(0, (figures[0].get("symbols", shown) if shown else 0) - MAX_SYMBOL_LINES)
    figures = figures[:1 + MAX_SYMBOL_LINES]
    for f in figures:
        where = "run" if f["scope"] == "run" else f["scope"]
        pbo = (f"PBO {fmt(f['pbo'], '.2f')} (CSCV, S={f['cscv_splits']})" if f["pbo"] is not None
               else f"PBO n/a ({f['pbo_note']})")
        lines.append(f"{where}: {f['trials']} trials (cells); best cell {f['best_label']}: walk-forward Sharpe "
                     f"{fmt(f['best_sharpe_annualised'], '+.2f')} (annualised), DSR {fmt(f['dsr'], '.2f')} (SR0 "
                     f"{fmt(f['expected_max_sharpe'], '+.4f')} per period from V[SR] "
                     f"{fmt(f['sharpe_variance'], '.3g')} across the cells); {pbo}"
                     + (f"; {f['rules']} selection rules among the cells" if f.get("rules", 1) > 1 else ""))
    if hidden:
        lines.append(f"... and {hidden} more symbols (runs show --json lists them)")
    lines += [f"{'the run' if f['scope'] == 'run' else f['scope']}: {f['verdict']}" for f in figures if f["verdict"]]
    return lines


# --- what `runs show` tells about each cell -----------------------------------------------------------------

RECORD_KEYS = ("return", "annual_return", "sharpe", "sharpe_ci_low", "sharpe_ci_high", "psr", "max_drawdown",
               "trades")
SELECTION_KEYS = ("trials", "pick", "dsr_pick", "dsr_walk_forward", "pbo", "cscv_splits", "spa_pvalue",
                  "reality_check_pvalue", "verdict", "strategies", "effective_trials", "effective_trials_method",
                  "psr_walk_forward", "walk_forward_rules", "spa_intraday_pvalue", "spa_cash_pvalue")
MODEL_KEYS = ("model", "weights", "device", "dtype", "compile")


def selection_trials(chosen: dict) -> str:
    """`` (eligible of 8 strategies, 4.3 effective: eigenvalues, Li & Ji 2005)``: what a cell's trial count
    counts; '' for a cell recorded before the trials were the eligible strategies."""
    if chosen.get("strategies") is None:
        return ""
    effective = chosen.get("effective_trials")
    more = "" if effective is None else f", {effective:.1f} effective: {chosen.get('effective_trials_method')}"
    return f" (eligible of {chosen['strategies']} strategies{more})"


def random_weights(weights, meta: dict) -> bool:
    """Whether a cell's forecasts came from random weights (a plumbing run, not a model's result): asked for
    (``--weights random``), or named so by the model (Toto's ``source`` "random(seed=0)", Kronos's label
    "kronos-small-random")."""
    return any("random" in str(v or "").lower() for v in (weights, meta.get("model"), meta.get("source")))


def cell_records(store: RunStore, run_id: str, limit: int = MAX_SYMBOL_LINES) -> tuple[list[dict], int]:
    """The first ``limit`` finished cells in plan order, each as ``runs show`` tells it: its label, windows and
    period, the walk-forward record and buy & hold over the same windows (max drawdown negative, as
    quantstats), its settings, costs, model and weights (random ones flagged) and the honest-selection
    statistics across its strategies (trials, DSR, PBO, SPA where recorded); and how many cells finished.
    The costs and selection statistics are the cell's stored columns; only the two records are scored again
    from the cell's decoded result (the SPA bootstrap is not run again)."""
    from marketcast.backtest.engine import SymbolResult
    from marketcast.backtest.report import signed_drawdown
    from marketcast.backtest.verdict import build as verdict_of
    from marketcast.errors import MarketcastError
    from marketcast.runs.codec import decode
    from marketcast.runs.rows import with_stored_selection

    columns = store.columns([run_id])
    if "record" not in columns:
        return [], 0
    names = run_axes(store, [run_id])
    settings = [n for n in setting_names() if n in columns]
    stored = [c for c in columns if c.startswith(("costs.", "selection."))]
    listing = ", ".join(f'"{c}"' for c in dict.fromkeys(["cell_id", "symbol", *settings, *stored, "record"]))
    total = int(store.query("SELECT count(*) AS n FROM cells WHERE status = 'ok'", run_ids=[run_id])["n"].iloc[0])
    found = store.query(f"SELECT {listing} FROM cells WHERE status = 'ok' ORDER BY cell_index LIMIT {int(limit)}",
                        run_ids=[run_id])
    out = []
    for _, row in found.iterrows():
        try:
            result = with_stored_selection(decode(row["record"]), row)  # its strip reads the stored figures
        except MarketcastError:  # a damaged record: the summary still shows the cell's stored columns
            continue
        if not isinstance(result, SymbolResult):
            continue
        meta = result.forecast_meta or {}
        record = lambda m: {k: plain(signed_drawdown(m).get(k)) for k in RECORD_KEYS}  # noqa: E731
        prefixed = lambda prefix: {c[len(prefix):]: plain(row[c]) for c in stored if c.startswith(prefix)}  # noqa: E731
        chosen = prefixed("selection.")
        out.append({
            "symbol": row["symbol"], "cell_id": row["cell_id"], "label": label(row, names),
            "windows": result.windows, "first_decision": result.decision_times[0].isoformat(),
            "last_settle": result.settle_times[-1].isoformat(), "asset_class": result.asset_class,
            "periods_per_year": plain(result.periods_per_year),
            "walk_forward": {**record(result.walk_forward["metrics"]), "mc_band": None if result.monte_carlo is None
                             else result.monte_carlo.walk_forward.band},  # Monte Carlo error, None before recorded
            "buy_and_hold": record(result.benchmark.metrics),
            "costs": prefixed("costs."),
            "model": {**{k: plain(row.get(k)) for k in MODEL_KEYS}, "source": meta.get("source"),
                      "random_weights": random_weights(row.get("weights"), meta)},
            "settings": {k: plain(row[k]) for k in settings if k not in MODEL_KEYS},
            "selection": {k: chosen.get(k) for k in SELECTION_KEYS},
            "verdict": verdict_of(result),  # the strip the backtest printed, from the same decoded result
        })
    return out, total
