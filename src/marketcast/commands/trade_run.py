"""How ``trade run`` shows what it does: a plan (with each symbol's price decimals), a cycle, or the settings in
effect; and the dry run's scratch copy of the state. The loop itself is :func:`marketcast.trade.start.start_loop`."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from marketcast.console import console, print_json
from marketcast.errors import ConfigError, ExitCode
from marketcast.settings import Settings
from marketcast.trade.start import LoopRequest


def scratch_copy(state_dir: Path, scratch: Path) -> Path:
    """Copy the databases (with their write-ahead logs) of ``state_dir`` into ``scratch``, so a dry run can
    reconcile and advance the paper clock without creating or touching a file in ``state_dir``."""
    for name in ("broker.db", "journal.db"):
        for suffix in ("", "-wal"):
            src = state_dir / f"{name}{suffix}"
            if src.exists():
                shutil.copyfile(src, scratch / src.name)
    return scratch


def print_plan(report, title: str, decimals: dict[str, int]) -> None:
    """The plan as a table, each price with its symbol's decimals (a $0.30 coin's limit is not 0.30)."""
    from marketcast.trade.loop.cycle import describe

    table = Table(title=title)
    for col in ("symbol", "strategy", "side", "entry", "take profit", "edge", "sharpe", "qty", "client_order_id",
                "skipped because"):
        table.add_column(col)
    for r in describe(report):
        fmt = lambda v, f: "" if v is None else format(v, f)  # noqa: E731
        price = f".{decimals.get(r['symbol'], 2)}f"
        table.add_row(r["symbol"], r["strategy"], r["side"], fmt(r["entry"], price), fmt(r["take_profit"], price),
                      fmt(r["edge"], ".3%"), fmt(r["sharpe"], ".2f"), fmt(r["qty"], "g"), r["client_order_id"],
                      r["why_not"])
    console.print(table)


def print_config(settings: Settings, broker_name: str, live: bool) -> None:
    from marketcast.commands.trade_settings import config_rows

    table = Table(title=f"trade settings ({', '.join(settings.files)})")
    for col in ("key", "value", "source", "from", "overrides"):
        table.add_column(col)
    for row in config_rows(settings, broker_name, live):
        table.add_row(*map(escape, row))
    console.print(table)


def print_cycle(report, title: str, decimals: dict[str, int]) -> None:
    """A live or paper cycle: its plan, then what became of its orders and the equity."""
    print_plan(report, title, decimals)
    console.print(f"submitted {len(report.submitted)}, already there {len(report.already)}, "
                  f"rejected {len(report.rejected)}, refused {len(report.refused)}, "
                  f"equity {report.equity:,.2f}")


def check_json(as_json: bool, once: bool, dry_run: bool) -> None:
    """A continuous loop never exits, so it has no one document to print: ``--json`` needs a run that ends."""
    if as_json and not (once or dry_run):
        raise ConfigError("--json needs --once or --dry-run")


def cycle_json(report, title: str) -> dict:
    """One cycle as ``--json`` writes it (src/marketcast/schemas/trade_run.schema.json): the plan's rows, as the table shows
    them, and what became of its orders (counts as ``trade replay --json`` gives them, with the order ids)."""
    from marketcast.trade.loop.cycle import describe

    return {"title": title, "decision_ts": report.decision_ts, "clock": report.clock, "plan": describe(report),
            "submitted": report.submitted, "already": report.already, "rejected": report.rejected,
            "refused": report.refused, "equity": report.equity}


def run_loop(settings: Settings, request: LoopRequest, as_json: bool = False) -> None:
    """The trading loop (:func:`marketcast.trade.start.start_loop`) under the rules ``settings`` decide, each
    plan printed (with ``as_json``: collected, and one JSON document printed at exit, while anything else the run
    prints goes to stderr); exits with the supervisor's code when it is not OK."""
    from marketcast.commands.trade_settings import rules
    from marketcast.trade.start import start_loop

    if not as_json:
        code = start_loop(settings, rules(settings, settings["seed"]), request, show_plan=print_plan,
                          on_cycle=print_cycle)
        if code != ExitCode.OK:
            raise typer.Exit(code)
        return
    from marketcast.forecast.exposure import exposure_field

    cycles: list[dict] = []
    exposure: dict = {}

    def collect(report, title: str, decimals: dict[str, int]) -> None:
        cycles.append(cycle_json(report, title))

    console.file = sys.stderr  # stdout holds the one document
    try:
        code = start_loop(settings, rules(settings, settings["seed"]), request, show_plan=collect, on_cycle=collect,
                          on_exposure=exposure.update)
    finally:
        console.file = None  # the console follows sys.stdout again (not the stream it had then)
    print_json({"mode": "live" if request.live else "paper", "broker": request.broker_name,
                "dry_run": request.dry_run, "state_dir": request.resolve_dir or request.state_dir,
                "exit_code": int(code), "cycles": cycles, **exposure_field(exposure)})
    if code != ExitCode.OK:
        raise typer.Exit(code)
