"""``marketcast sweep SPEC.toml``: a grid of backtests on Ray, every cell recorded in the run store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from marketcast.commands import options
from marketcast.console import console, err_console
from marketcast.errors import ConfigError


def sweep(
    spec: Annotated[Path, typer.Argument(help="The sweep spec (TOML): data, fixed options, grid axes.")],
    resume: Annotated[bool, typer.Option("--resume", help="Continue the latest run of this spec (or --run-id), "
                                                          "skipping the cells it already holds.")] = False,
    run_id: Annotated[Optional[str], typer.Option(help="Name of the new run (default: made from the spec's name), "
                                                       "or the run to resume.")] = None,
    address: Annotated[Optional[str], typer.Option(help="Ray cluster to join (default: $RAY_ADDRESS, else a "
                                                        "local Ray on this machine).")] = None,
    num_cpus: Annotated[Optional[int], typer.Option(help="CPUs of the local Ray (default: this machine's).")] = None,
    retry_failed: Annotated[int, typer.Option(help="With --resume: try each failed cell up to N more times "
                                                   "(every attempt's error is kept; poison cells are not "
                                                   "retried).")] = 1,
    local: Annotated[bool, typer.Option("--local", help="Compute in this process, without Ray (small sweeps: "
                                                        "the same cells, see docs/scaling.md).")] = False,
    data_dir: Annotated[Optional[Path], typer.Option(help="Folder of <SYMBOL>.csv/.parquet bars (default: the "
                                                          "spec's [data] dir).")] = None,
    store: Annotated[Optional[Path], typer.Option(help="Run store folder (default: $MARKETCAST_RUN_STORE or "
                                                       "out/runs).")] = None,
    asset_class: options.AssetClass = None,
    periods_per_year: options.PeriodsPerYear = None,
) -> None:
    """Backtest every cell of SPEC's grid on Ray; a failing cell is recorded with its error, the rest go on.

    Exits 1 when any cell failed (see 'marketcast runs show RUN').
    """
    from marketcast.runs.store import RunStore, store_root
    from marketcast.sweep.runner import run_sweep
    from marketcast.sweep.spec import load_spec

    if num_cpus is not None and num_cpus < 1:
        raise ConfigError(f"--num-cpus must be >= 1, got {num_cpus}")
    root = store_root(store)
    if root is None:
        raise ConfigError("a sweep needs the run store, which is off (MARKETCAST_RUN_STORE=off); pass --store DIR")
    runs = RunStore(root)
    if local and address:
        raise ConfigError("--local computes without Ray; drop --address")
    outcome = run_sweep(load_spec(spec, data_dir, asset_class, periods_per_year), runs, resume=resume,
                        run_id=run_id, address=address, num_cpus=num_cpus, retry_failed=retry_failed, local=local)
    resumed = f", {outcome.skipped} from before the resume" if resume else ""
    retried = f", {outcome.retried} failed attempts retried" if outcome.retried else ""
    poison = f" ({outcome.poison} poison)" if outcome.poison else ""
    console.print(f"sweep {outcome.run_id}: {outcome.planned} cells, {outcome.ok} ok, {outcome.failed} failed"
                  f"{poison}{resumed}{retried}; stored in {root}/ (marketcast runs show {outcome.run_id})",
                  highlight=False)
    if outcome.ok:  # every cell is a trial: deflate the best of them (docs/scaling.md, multiple testing)
        from marketcast.runs.overview import selection, selection_lines

        for line in selection_lines(selection(runs, outcome.run_id)):
            console.print(escape(line), highlight=False, soft_wrap=True)
    console.print(f"run {outcome.run_id}", highlight=False, markup=False, soft_wrap=True)  # stdout's last line
    if outcome.failed:
        from marketcast.runs.overview import axes, cells, label

        found = cells(runs, outcome.run_id)
        if "attempt" in found:  # a retried cell's latest attempt is its result
            found = found.assign(attempt=found["attempt"].fillna(0)).sort_values("attempt", kind="stable")
            found = found.drop_duplicates("cell_id", keep="last").sort_values("cell_index", kind="stable")
        names = axes([found])
        failed = found[found["status"] != "ok"]
        for _, row in failed.sort_values("status", ascending=False, kind="stable").head(10).iterrows():
            what = "poison" if row["status"] == "poison" else "failed"
            err_console.print(f"[red]{what}:[/red] {escape(label(row, names))}: {escape(row['error'])}",
                              highlight=False, soft_wrap=True)
        if len(failed) > 10:
            err_console.print(f"... and {len(failed) - 10} more", highlight=False)
        raise typer.Exit(1)
