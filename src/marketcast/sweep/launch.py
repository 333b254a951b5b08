"""``marketcast sweep``'s work, from its options to what it reports: the checks, the run store, the sweep
(:func:`marketcast.sweep.runner.run_sweep`), the best cells deflated for the number of trials, and the failed
cells to name.

Kept out of the command so the command only parses and prints, and so a sweep runs without the CLI.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from marketcast.errors import ConfigError
from marketcast.sweep.runner import Outcome

SHOWN_FAILURES = 10  # failed cells named one by one; the rest are counted


@dataclass(frozen=True)
class Failure:
    """One failed cell as the summary names it."""

    kind: str  # "poison" | "failed"
    label: str  # the cell's grid values
    error: str


@dataclass(frozen=True)
class SweepSummary:
    """A finished sweep: the runner's outcome, the store it went to, the selection's lines and the failures."""

    outcome: Outcome
    root: Path
    selection: list[str]  # the best cells, deflated for the number of trials (empty when no cell is ok)
    failures: list[Failure]  # the first SHOWN_FAILURES, poison first
    failed_total: int
    exposure: list[str] = field(default_factory=list)  # what each model's weights may have seen, once per weights


def _failures(runs, run_id: str) -> tuple[list[Failure], int]:
    """The run's failed cells by their latest attempt, poison first."""
    from marketcast.runs.overview import axes, cells, label

    found = cells(runs, run_id)
    if "attempt" in found:  # a retried cell's latest attempt is its result
        found = found.assign(attempt=found["attempt"].fillna(0)).sort_values("attempt", kind="stable")
        found = found.drop_duplicates("cell_id", keep="last").sort_values("cell_index", kind="stable")
    names = axes([found])
    failed = found[found["status"] != "ok"]
    shown = failed.sort_values("status", ascending=False, kind="stable").head(SHOWN_FAILURES)
    return [Failure("poison" if row["status"] == "poison" else "failed", label(row, names), row["error"])
            for _, row in shown.iterrows()], len(failed)


def launch_sweep(spec: Path, *, resume: bool = False, run_id: Optional[str] = None, address: Optional[str] = None,
                 num_cpus: Optional[int] = None, retry_failed: int = 1, local: bool = False,
                 data_dir: Optional[Path] = None, store: Optional[Path] = None,
                 asset_class: Optional[list[str]] = None, periods_per_year: Optional[float] = None,
                 max_cells: int = 100_000, timezone: Optional[str] = None, require_clean: bool = False) -> SweepSummary:
    """Backtest every cell of ``spec``'s grid (on Ray unless ``local``) into the run store, and summarise."""
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
    if not local:  # a cluster that does not answer is one line within a deadline, before the spec or the store
        from marketcast.sweep.address import check_reachable

        check_reachable(address or os.environ.get("RAY_ADDRESS") or None)
    plan = load_spec(spec, data_dir, asset_class, periods_per_year, max_cells, timezone, require_clean)
    outcome = run_sweep(plan, runs, resume=resume, run_id=run_id, address=address, num_cpus=num_cpus,
                        retry_failed=retry_failed, local=local)
    lines: list[str] = []
    if outcome.ok:  # every cell is a trial: deflate the best of them (docs/scaling.md, multiple testing)
        from marketcast.runs.overview import selection, selection_lines

        lines = list(selection_lines(selection(runs, outcome.run_id)))
    failures, total = _failures(runs, outcome.run_id) if outcome.failed else ([], 0)
    return SweepSummary(outcome, root, lines, failures, total, exposure_lines(plan))


def exposure_lines(plan) -> list[str]:
    """``model: line`` for each of the spec's (model, weights) that carries a standing label
    (:func:`marketcast.forecast.exposure.standing_lines`); the cells' own labels are in ``runs show``."""
    import dataclasses

    from marketcast.forecast.exposure import exposure_of, standing_lines

    one = dataclasses.replace(plan, symbols=plan.symbols[:1], require_clean=False)  # every grid point, checked
    models = dict.fromkeys((c.model, c.weights) for c in one.cells())
    return [f"{model}: {line}" for model, weights in models for line in standing_lines(exposure_of(model, weights))]
