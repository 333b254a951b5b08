"""How ``trade run`` shows what it does: a plan (with each symbol's price decimals), a cycle, or the settings in
effect; and the dry run's scratch copy of the state. The loop itself is :func:`marketcast.trade.start.start_loop`."""

from __future__ import annotations

import shutil
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from marketcast.console import console
from marketcast.errors import ExitCode
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


def run_loop(settings: Settings, request: LoopRequest) -> None:
    """The trading loop (:func:`marketcast.trade.start.start_loop`) under the rules ``settings`` decide, each
    plan printed; exits with the supervisor's code when it is not OK."""
    from marketcast.commands.trade_settings import rules
    from marketcast.trade.start import start_loop

    code = start_loop(settings, rules(settings, settings["seed"]), request, show_plan=print_plan, on_cycle=print_cycle)
    if code != ExitCode.OK:
        raise typer.Exit(code)
