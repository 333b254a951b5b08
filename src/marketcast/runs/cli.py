"""``marketcast runs list | show RUN | compare RUN_A RUN_B | query SQL | compact RUN``: the run store
(``marketcast report RUN`` re-makes a run's reports)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pandas as pd
import typer
from rich.markup import escape
from rich.table import Table

from marketcast import options
from marketcast.console import console, print_json
from marketcast.errors import ConfigError

app = typer.Typer(no_args_is_help=True)

STORE_OPT = typer.Option(None, "--store", help="Run store folder (default: $MARKETCAST_RUN_STORE or out/runs).")
RUN_ARG = typer.Argument(..., help="Run id, a unique prefix of it, or 'latest'.")
SHOWN_ROWS = 40


def open_store(path: Optional[Path]):
    """The run store of ``--store`` (or the default); a :class:`ConfigError` when it is off."""
    from marketcast.runs.store import RunStore, store_root

    root = store_root(path)
    if root is None:
        raise ConfigError("the run store is off (MARKETCAST_RUN_STORE=off); pass --store DIR")
    return RunStore(root)


def _cell(value) -> str:
    from marketcast.runs.views import plain

    value = plain(value)
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:+.4f}" if abs(value) < 1e4 else f"{value:.4g}"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


def _print_frame(frame: pd.DataFrame, title: str, as_json: bool) -> None:
    if as_json:
        print_json(frame.to_dict("records"))
        return
    table = Table(title=title)
    for col in frame.columns:
        numeric = pd.api.types.is_numeric_dtype(frame[col])
        table.add_column(str(col), justify="right" if numeric else "left", overflow="fold", no_wrap=col != "error")
    for row in frame.itertuples(index=False):
        table.add_row(*(escape(_cell(v)) for v in row))
    console.print(table)


@app.command("list")
def list_(store: Optional[Path] = STORE_OPT, as_json: options.AsJson = False) -> None:
    """Every run in the store, oldest first: cells finished, failed and planned."""
    from marketcast.runs.views import list_runs

    runs = open_store(store)
    with runs.one_warning():
        listing = list_runs(runs)
    if listing.empty and not as_json:
        console.print(f"the run store {runs.root} holds no runs yet; run 'marketcast backtest' or "
                      "'marketcast sweep' first", highlight=False, soft_wrap=True)
        return
    if not as_json:  # to the second on screen, no spec hash; the JSON keeps them (the microseconds order runs)
        listing["created_at"] = listing["created_at"].str.slice(0, 19)
        listing = listing.drop(columns=["spec_hash"])
    _print_frame(listing, f"runs in {runs.root}", as_json)


@app.command()
def show(
    run: str = RUN_ARG,
    by: Optional[str] = typer.Option(None, help="Comma-separated columns to group by (default: the grid's axes)."),
    metrics: str = typer.Option("return,sharpe,max_drawdown", help="Comma-separated metrics to average."),
    store: Optional[Path] = STORE_OPT,
    as_json: options.AsJson = False,
) -> None:
    """A run: what it is, multiple testing across its cells (trials, the best cell's deflated Sharpe, PBO),
    its mean metrics per strategy and grid point, and its failed cells."""
    from marketcast.runs.views import cell_counts, run_status, selection, selection_lines, summary

    runs = open_store(store)
    with runs.one_warning():
        run_id = runs.resolve(run)
        info = runs.info(run_id)
        groups = [c.strip() for c in by.split(",") if c.strip()] if by else None
        total, ok, failed = cell_counts(runs, run_id)
        table = summary(runs, run_id, groups, tuple(m.strip() for m in metrics.split(",") if m.strip()))
        trials = selection(runs, run_id) if info.get("kind") == "sweep" else []  # a backtest's cells are its symbols
    status = run_status(info, total)
    if as_json:
        print_json({"run": {**info, "status": status}, "summary": table.to_dict("records"), "selection": trials,
                    "failed": failed.to_dict("records")})
        return
    console.print(f"[bold]{run_id}[/bold] ({info.get('kind')}, {status}, started {info.get('created_at')}, code "
                  f"{info.get('code_version')}, spec {info.get('spec_hash')}): {ok} "
                  f"cells ok, {len(failed)} failed, {info.get('cells_total')} planned", highlight=False, soft_wrap=True)
    for line in selection_lines(trials):
        console.print(escape(line), highlight=False, soft_wrap=True)
    if not table.empty:
        _print_frame(table, "mean over cells", False)
    if len(failed):
        _print_frame(failed, "failed cells", False)


@app.command()
def compare(
    run_a: str = typer.Argument(..., help="Run A (e.g. eager)."),
    run_b: str = typer.Argument(..., help="Run B (e.g. compiled)."),
    show_all: bool = typer.Option(False, "--all", help=f"List every row (default: PASS rows are hidden when "
                                                       f"there are more than {SHOWN_ROWS})."),
    store: Optional[Path] = STORE_OPT,
    as_json: options.AsJson = False,
) -> None:
    """Compare two runs per cell and strategy: return delta > 0.05 FAIL, > 0.01 WARN (exit 1 on FAIL)."""
    from marketcast.compile.cli import print_comparison
    from marketcast.runs.compare import compare_runs

    runs = open_store(store)
    with runs.one_warning():
        a, b = runs.resolve(run_a), runs.resolve(run_b)
        result = compare_runs(runs, a, b)
    if not as_json and not show_all and len(result["rows"]) > SHOWN_ROWS:
        shown = [r for r in result["rows"] if r["status"] != "PASS"]
        keep = {r["symbol"] for r in shown}
        hidden = len(result["rows"]) - len(shown)
        result = {**result, "rows": shown, "metric_deltas": {k: v for k, v in result["metric_deltas"].items()
                                                             if k in keep},
                  "notes": [*result["notes"], f"{hidden} PASS rows hidden (--all lists them)"]}
    print_comparison(result, f"{a} vs {b} (matched on {', '.join(result['matched_on'])})", as_json)


@app.command()
def query(
    sql: str = typer.Argument(..., help="DuckDB SQL over the views rows, cells (one row a cell) and results "
                                        "(one row a cell and strategy)."),
    run: Optional[str] = typer.Option(None, help="Only this run's rows, faster on a large store (default: every "
                                                 "run's)."),
    store: Optional[Path] = STORE_OPT,
    as_json: options.AsJson = False,
) -> None:
    """Run one SELECT on the store, e.g. 'SELECT symbol, strategy, sharpe FROM results ORDER BY sharpe DESC LIMIT
    10'. It reads only the store's parts: writing files, reading others, ATTACH, INSTALL and SET are refused."""
    runs = open_store(store)
    with runs.one_warning():
        run_ids = [runs.resolve(run)] if run else None
        frame = runs.query(sql, run_ids=run_ids)
    _print_frame(frame.drop(columns=[c for c in ("record",) if c in frame.columns]), sql, as_json)


@app.command()
def compact(
    run: str = RUN_ARG,
    keep_parts: bool = typer.Option(False, "--keep-parts", help="Keep the merged parts on disk (readers ignore "
                                                                "them)."),
    store: Optional[Path] = STORE_OPT,
) -> None:
    """Merge a run's parts into a few sorted Parquet files (safe to interrupt: re-run it to finish)."""
    runs = open_store(store)
    with runs.one_warning():
        run_id = runs.resolve(run)
        done = runs.compact(run_id, keep_parts=keep_parts)
    console.print(f"{run_id}: {done['files_before']} files -> {done['files_after']}", highlight=False,
                  soft_wrap=True)
