"""``marketcast runs list | show RUN | compare RUN_A RUN_B | query SQL | compact RUN``: the run store
(``marketcast report RUN`` re-makes a run's reports)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.markup import escape
from rich.table import Table

from marketcast.commands import flags
from marketcast.console import console, print_json
from marketcast.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

app = typer.Typer(no_args_is_help=True)

STORE_OPT = typer.Option(None, "--store", help="Run store folder (default: $MARKETCAST_RUN_STORE or out/runs).")
RUN_ARG = typer.Argument(..., help="Run id, a unique prefix of it, or 'latest'.")
SHOWN_ROWS = 40
PLAIN_ABOVE = 200  # rows: `runs list` and `runs query` print plain columns past this many
# `runs query`'s bounds (marketcast.runs.bounded): defaults that suit a person at a terminal, maxima for the options
TIMEOUT_S, MAX_ROWS = 30.0, 10_000
TIMEOUT_MAX_S, MAX_ROWS_MAX = 86_400.0, 10_000_000


def open_store(path: Optional[Path]):
    """The run store of ``--store`` (or the default); a :class:`ConfigError` when it is off."""
    from marketcast.runs.store import RunStore, store_root

    root = store_root(path)
    if root is None:
        raise ConfigError("the run store is off (MARKETCAST_RUN_STORE=off); pass --store DIR")
    return RunStore(root)


def _cell(value) -> str:
    from marketcast.runs.overview import plain

    return _text(plain(value))


def _text(value) -> str:
    """A plain Python value as a table shows it."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:+.4f}" if abs(value) < 1e4 else f"{value:.4g}"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


def _print_frame(frame: pd.DataFrame, title: str, as_json: bool, plain_above: int | None = None) -> None:
    """``frame`` as JSON or a table (:func:`_print_rows`)."""
    import pandas as pd

    if as_json:
        print_json(frame.to_dict("records"))
        return
    numeric = [pd.api.types.is_numeric_dtype(frame[c]) for c in frame.columns]
    _print_rows([str(c) for c in frame.columns], [[_cell(v) for v in row] for row in frame.itertuples(index=False)],
                numeric, title, plain_above)


def _print_rows(columns: list[str], cells: list[list[str]], numeric: list[bool], title: str,
                plain_above: int | None) -> None:
    """A table of ``cells`` (text), ``numeric`` columns to the right; past ``plain_above`` rows as plain aligned
    columns (a rich table costs about 1 ms a row: 1,000 runs would take a second to draw)."""
    if plain_above is not None and len(cells) > plain_above:
        widths = [max(len(row[i]) for row in [columns, *cells]) for i in range(len(columns))]
        lines = ["  ".join(v.rjust(w) if r else v.ljust(w) for v, w, r in zip(row, widths, numeric)).rstrip()
                 for row in [columns, *cells]]
        console.file.write("\n".join([title, lines[0], "  ".join("-" * w for w in widths), *lines[1:]]) + "\n")
        return
    table = Table(title=title)
    for col, right in zip(columns, numeric):
        table.add_column(col, justify="right" if right else "left", overflow="fold", no_wrap=col != "error")
    for row in cells:
        table.add_row(*(escape(v) for v in row))
    console.print(table)


@app.command("list")
def list_(store: Optional[Path] = STORE_OPT, as_json: flags.AsJson = False) -> None:
    """Every run in the store, oldest first: cells finished, failed and planned."""
    from marketcast.runs.listing import COLUMNS, list_rows

    runs = open_store(store)
    with runs.one_warning():
        listing = list_rows(runs)
    if as_json:
        print_json(listing)
        return
    if not listing:
        console.print(f"the run store {runs.root} holds no runs yet; run 'marketcast backtest' or "
                      "'marketcast sweep' first", highlight=False, soft_wrap=True)
        return
    # to the second on screen, no spec hash; the JSON keeps them (the microseconds order runs)
    shown = [c for c in COLUMNS if c != "spec_hash"]
    cells = [[_text(r[c][:19] if c == "created_at" and isinstance(r[c], str) else r[c]) for c in shown]
             for r in listing]
    numeric = [any(isinstance(r[c], (int, float)) and not isinstance(r[c], bool) for r in listing)
               and all(isinstance(r[c], (int, float, type(None))) for r in listing) for c in shown]
    _print_rows(shown, cells, numeric, f"runs in {runs.root}", PLAIN_ABOVE)


@app.command()
def show(
    run: str = RUN_ARG,
    by: Optional[str] = typer.Option(None, help="Comma-separated columns to group by (default: the grid's axes)."),
    metrics: str = typer.Option("return,sharpe,max_drawdown", help="Comma-separated metrics to average."),
    store: Optional[Path] = STORE_OPT,
    as_json: flags.AsJson = False,
) -> None:
    """A run: what it is, multiple testing across its cells (trials, the best cell's deflated Sharpe, PBO),
    each cell's walk-forward record against buy & hold with its settings, costs, model and weights and its
    strategies' selection statistics, its mean metrics per strategy and grid point, and its failed cells."""
    from marketcast.runs.listing import resume_hint, run_status
    from marketcast.runs.rows import GRID_KINDS
    from marketcast.runs.overview import (MAX_SYMBOL_LINES, cell_counts, cell_records, selection, selection_lines,
                                          summary)

    runs = open_store(store)
    with runs.one_warning():
        run_id = runs.open_run(run)
        info = runs.info(run_id)
        groups = [c.strip() for c in by.split(",") if c.strip()] if by else None
        total, ok, failed = cell_counts(runs, run_id)
        table = summary(runs, run_id, groups, tuple(m.strip() for m in metrics.split(",") if m.strip()))
        trials = selection(runs, run_id, None if as_json else MAX_SYMBOL_LINES) if info.get(
            "kind") in GRID_KINDS else []
        records, finished = cell_records(runs, run_id)
        writing = runs.reader.writing(run_id)
    if "max_drawdown" in table:  # negative, as everywhere a user reads it (runs recorded before stored it positive)
        table["max_drawdown"] = 0.0 - table["max_drawdown"].abs()  # 0.0 - 0.0 is 0.0, never -0.0
    status = run_status(info, total, writing)
    if as_json:
        print_json({"run": {**info, "status": status}, "summary": table.to_dict("records"), "selection": trials,
                    "records": records, "failed": failed.to_dict("records")})
        return
    console.print(f"[bold]{run_id}[/bold] ({info.get('kind')}, {status}, started {info.get('created_at')}, code "
                  f"{info.get('code_version')}, spec {info.get('spec_hash')}): {ok} "
                  f"cells ok, {len(failed)} failed, {info.get('cells_total')} planned", highlight=False, soft_wrap=True)
    if resume_hint(info, status):
        console.print(f"interrupted: no process is writing it; '{resume_hint(info, status)}' computes the cells "
                      "left", highlight=False, soft_wrap=True, markup=False)
    for line in selection_lines(trials):
        console.print(escape(line), highlight=False, soft_wrap=True)
    _print_records(records, finished)
    if not table.empty:
        _print_frame(table, "mean over cells", False)
    if len(failed):
        _print_frame(failed, "failed cells", False)


def _setting(name: str, value) -> str:
    """``fee=default``, ``ci_band=0.4,0.6``, ``selection.lookback=70, selection.min_trades=10``: no Python repr."""
    if isinstance(value, dict):
        return ", ".join(_setting(f"{name}.{k}", v) for k, v in value.items())
    if value is None:
        return f"{name}=default"
    if isinstance(value, list):
        return f"{name}={','.join(format(v, 'g') if isinstance(v, float) else str(v) for v in value)}"
    return f"{name}={format(value, 'g') if isinstance(value, float) else value}"


def _print_records(records: list[dict], finished: int) -> None:
    """Each cell's walk-forward record against buy & hold, then what produced it: settings, costs, model and
    weights (random ones in red) and its strategies' selection statistics."""
    from marketcast.backtest.tables import pct
    from marketcast.runs.overview import selection_trials

    if not records:
        return
    from marketcast.backtest.verdict import one_line, terminal_lines

    for r in records:  # the verdict strip first, as the backtest printed it (a line a cell when there are several)
        lines = terminal_lines(r["label"], r["verdict"]) if len(records) == 1 else [one_line(r["label"], r["verdict"])]
        for line in lines:
            console.print(line, highlight=False, soft_wrap=True)
    fmt = lambda x, spec="+.2f": "—" if x is None else format(x, spec)  # noqa: E731
    table = Table(title="walk-forward record and buy & hold over the same windows")
    for col in ("cell", "windows", "record", "return", "MC ±", "Sharpe", "CI", "PSR", "max DD", "trades"):
        table.add_column(col, justify="left" if col in ("cell", "windows", "record") else "right")
    for r in records:
        span = f"{r['windows']} {r['first_decision'][:10]} → {r['last_settle'][:10]}"
        for i, (name, m) in enumerate((("walk-forward", r["walk_forward"]), ("buy & hold", r["buy_and_hold"]))):
            ci = ("—" if m["sharpe_ci_low"] is None else
                  f"[{fmt(m['sharpe_ci_low'], '+.1f')}, {fmt(m['sharpe_ci_high'], '+.1f')}]")
            band = m.get("mc_band")
            table.add_row(escape(r["label"]) if i == 0 else "", span if i == 0 else "", name, pct(m["return"]),
                          "—" if band is None else f"±{100 * band:.1f}", fmt(m["sharpe"]), ci, fmt(m["psr"], ".2f"), pct(m["max_drawdown"]),
                          fmt(m["trades"], "d"))
    console.print(table)
    shown = {k: v for k, v in records[0]["settings"].items()
             if k not in ("strategies", "data_dir") and all(r["settings"].get(k) == v for r in records)}
    console.print("settings: " + ", ".join(_setting(k, v) for k, v in shown.items()), highlight=False,
                  soft_wrap=True, markup=False)
    for r in records:
        c, m, s = r["costs"], r["model"], r["selection"]
        weights = ("no learned weights" if m["model"] == "baseline" and not m["weights"] else
                   f"weights {m['source'] or m['weights'] or 'auto'}")
        warn = " [bold red]RANDOM WEIGHTS: plumbing only, not a model's result[/]" if m["random_weights"] else ""
        console.print(f"{escape(r['label'])}: costs fee {fmt(c.get('fee_bps'), 'g')} bp + half-spread "
                      f"{fmt(c.get('half_spread_bps'), 'g')} bp + slippage {fmt(c.get('slippage_bps'), 'g')} bp "
                      "a side, "
                      f"borrow {pct(c.get('borrow_rate')).lstrip('+')} a year; model {escape(str(m['model']))}, "
                      f"{escape(weights)}, {m['device']} {m['dtype']}{warn}", highlight=False, soft_wrap=True)
        splits = "" if s["cscv_splits"] is None else f" (CSCV, S={s['cscv_splits']})"
        console.print(f"  selection over its strategies: {s['trials']} trials{selection_trials(s)}, DSR pick "
                      f"{fmt(s['dsr_pick'], '.2f')}, walk-forward rule PSR {fmt(s['psr_walk_forward'], '.2f')} DSR "
                      f"{fmt(s['dsr_walk_forward'], '.2f')}, PBO {fmt(s['pbo'], '.2f')}{splits}, SPA p c→c "
                      f"{fmt(s['spa_pvalue'], '.3f')} o→c {fmt(s['spa_intraday_pvalue'], '.3f')} cash "
                      f"{fmt(s['spa_cash_pvalue'], '.3f')}" + (f"; {escape(s['verdict'])}" if s["verdict"] else ""),
                      highlight=False, soft_wrap=True)
    if finished > len(records):
        console.print(f"[dim]... and {finished - len(records)} more cells (runs query lists them)[/dim]")


@app.command()
def compare(
    run_a: str = typer.Argument(..., help="Run A (e.g. eager)."),
    run_b: str = typer.Argument(..., help="Run B (e.g. compiled)."),
    show_all: bool = typer.Option(False, "--all", help=f"List every row (default: PASS rows are hidden when "
                                                       f"there are more than {SHOWN_ROWS})."),
    strict: bool = typer.Option(False, "--strict", help="Settings that differ between the runs are a FAIL too "
                                                        "(default: listed, exit 0)."),
    limit: int = typer.Option(50, min=1, help="FAIL and WARN rows listed when PASS rows are hidden (their count "
                                              "is printed)."),
    store: Optional[Path] = STORE_OPT,
    as_json: flags.AsJson = False,
) -> None:
    """Compare two runs per cell and strategy. Settings that differ (e.g. fee 0.001 vs 0.002) are listed and
    exit 0 (--strict: 1); for the same settings a return delta > 0.05 is a FAIL (exit 1), > 0.01 a WARN."""
    from marketcast.commands.compile import print_comparison
    from marketcast.runs.compare import compare_runs

    runs = open_store(store)
    with runs.one_warning():
        a, b = runs.open_run(run_a), runs.open_run(run_b)
        result = compare_runs(runs, a, b, strict=strict, show_all=show_all, shown=SHOWN_ROWS, limit=limit)
    print_comparison(result, f"{a} vs {b} (matched on {', '.join(result['matched_on'])})", as_json)


@app.command()
def query(
    sql: str = typer.Argument(..., help="DuckDB SQL over the views rows, cells (one row a cell) and results "
                                        "(one row a cell and strategy)."),
    run: Optional[str] = typer.Option(None, help="Only this run's rows, faster on a large store (default: every "
                                                 "run's)."),
    store: Optional[Path] = STORE_OPT,
    timeout: float = typer.Option(TIMEOUT_S, "--timeout", min=0.001, max=TIMEOUT_MAX_S, metavar="SECONDS",
                                  help=f"Stop the query after this long (exit 2), at most {TIMEOUT_MAX_S:,.0f}."),
    max_rows: int = typer.Option(MAX_ROWS, "--max-rows", min=1, max=MAX_ROWS_MAX,
                                 help=f"Show at most this many rows (a warning says when rows were cut), at most "
                                      f"{MAX_ROWS_MAX:,}."),
    as_json: flags.AsJson = False,
) -> None:
    """Run one SELECT on the store, e.g. 'SELECT symbol, strategy, sharpe FROM results ORDER BY sharpe DESC LIMIT
    10'. It reads only the store's parts: writing files, reading others, ATTACH, INSTALL and SET are refused.
    Ctrl-C stops a running query at once."""
    import warnings

    from marketcast.runs.bounded import Bounds

    runs = open_store(store)
    with runs.one_warning():
        run_ids = [runs.open_run(run)] if run else None
        frame, cut = runs.bounded_query(sql, Bounds(timeout, max_rows), run_ids=run_ids)
    if cut:
        warnings.warn(f"the query returned more than {max_rows:,} rows; showing the first {max_rows:,} (add a "
                      "LIMIT, or raise --max-rows)", UserWarning)
    _print_frame(frame.drop(columns=[c for c in ("record",) if c in frame.columns]), sql, as_json,
                 plain_above=PLAIN_ABOVE)


@app.command()
def compact(
    run: str = RUN_ARG,
    keep_parts: bool = typer.Option(False, "--keep-parts", help="Keep the merged parts on disk (readers ignore "
                                                                "them)."),
    store: Optional[Path] = STORE_OPT,
    as_json: flags.AsJson = False,
) -> None:
    """Merge a run's parts into a few sorted Parquet files (safe to interrupt: re-run it to finish)."""
    runs = open_store(store)
    with runs.one_warning():
        run_id = runs.resolve(run)
        done = runs.compact(run_id, keep_parts=keep_parts)
    if as_json:
        print_json({"run_id": run_id, **done})
        return
    console.print(f"{run_id}: {done['files_before']} files -> {done['files_after']}", highlight=False,
                  soft_wrap=True)
