"""``marketcast sweep SPEC.toml``: a grid of backtests on Ray, every cell recorded in the run store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from marketcast.commands import options
from marketcast.console import console, err_console, print_json


Spec = Annotated[Path, typer.Argument(help="The sweep spec (TOML): data, fixed options, grid axes.")]
Resume = Annotated[bool, typer.Option("--resume", help="Continue the latest run of this spec (or --run-id), "
                                      "skipping the cells it already holds.")]
RunId = Annotated[Optional[str], typer.Option(help="Name of the new run (default: made from the spec's name), or "
                                              "the run to resume.")]
Address = Annotated[Optional[str], typer.Option(help="Ray cluster to join (default: $RAY_ADDRESS, else a local Ray "
                                                "on this machine).")]
NumCpus = Annotated[Optional[int], typer.Option(help="CPUs of the local Ray (default: this machine's).")]
RetryFailed = Annotated[int, typer.Option(help="With --resume: try each failed cell up to N more times (every "
                                          "attempt's error is kept; poison cells are not retried).")]
Local = Annotated[bool, typer.Option("--local", help="Compute in this process, without Ray (small sweeps: the same "
                                     "cells, see docs/scaling.md).")]
DataDir = Annotated[Optional[Path], typer.Option(help="Folder of <SYMBOL>.csv/.parquet bars (default: the spec's "
                                                 "\\[data] dir).")]
MAX_MAX_CELLS = 10_000_000  # --max-cells itself: a grid this size is days of work on any cluster
MaxCells = Annotated[int, typer.Option(min=1, max=MAX_MAX_CELLS,
                                       help="Refuse a grid of more cells than this (counted from its axes before "
                                            f"any cell is built), at most {MAX_MAX_CELLS:,}.")]
Store = Annotated[Optional[Path], typer.Option(help="Run store folder (default: $MARKETCAST_RUN_STORE or "
                                               "out/runs).")]


def sweep(
    spec: Spec, resume: Resume = False, run_id: RunId = None, address: Address = None, num_cpus: NumCpus = None,
    retry_failed: RetryFailed = 1, local: Local = False, data_dir: DataDir = None, store: Store = None,
    asset_class: options.AssetClass = None, periods_per_year: options.PeriodsPerYear = None,
    max_cells: MaxCells = 100_000, timezone: options.Timezone = None, as_json: options.AsJson = False,
    require_clean: options.RequireClean = False,
) -> None:
    """Backtest every cell of SPEC's grid on Ray; a failing cell is recorded with its error, the rest go on.

    Exits 1 when any cell failed (see 'marketcast runs show RUN').
    """
    from marketcast.sweep.launch import launch_sweep

    done = launch_sweep(spec, resume=resume, run_id=run_id, address=address, num_cpus=num_cpus,
                        retry_failed=retry_failed, local=local, data_dir=data_dir, store=store,
                        asset_class=asset_class, periods_per_year=periods_per_year, max_cells=max_cells,
                        timezone=timezone, require_clean=require_clean)
    outcome = done.outcome
    if as_json:  # src/marketcast/schemas/sweep.schema.json; still exit 1 when a cell failed
        print_json({"run_id": outcome.run_id, "store": done.root, "planned": outcome.planned, "ok": outcome.ok,
                    "failed": outcome.failed, "poison": outcome.poison, "skipped": outcome.skipped,
                    "retried": outcome.retried, "selection": list(done.selection), "exposure": done.exposure,
                    "failures": [{"kind": f.kind, "label": f.label, "error": f.error} for f in done.failures]})
        if outcome.failed:
            raise typer.Exit(1)
        return
    resumed = f", {outcome.skipped} from before the resume" if resume else ""
    retried = f", {outcome.retried} failed attempts retried" if outcome.retried else ""
    poison = f" ({outcome.poison} poison)" if outcome.poison else ""
    console.print(f"sweep {outcome.run_id}: {outcome.planned} cells, {outcome.ok} ok, {outcome.failed} failed"
                  f"{poison}{resumed}{retried}; stored in {done.root}/ (marketcast runs show {outcome.run_id})",
                  highlight=False)
    for line in [*done.selection, *done.exposure]:  # the best cells, then what the weights may have seen
        console.print(escape(line), highlight=False, soft_wrap=True)
    console.print(f"run {outcome.run_id}", highlight=False, markup=False, soft_wrap=True)  # stdout's last line
    if outcome.failed:
        for failure in done.failures:
            err_console.print(f"[red]{failure.kind}:[/red] {escape(failure.label)}: {escape(failure.error)}",
                              highlight=False, soft_wrap=True)
        if done.failed_total > len(done.failures):
            err_console.print(f"... and {done.failed_total - len(done.failures)} more", highlight=False)
        raise typer.Exit(1)
