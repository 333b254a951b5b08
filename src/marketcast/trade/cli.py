"""``marketcast trade run | status | reconcile | replay``.

Paper (the embedded SQLite broker) is the default. Alpaca needs ``--broker alpaca`` and keys in the
environment; live money needs ``--live`` *and* ``--i-understand-live-trading`` (the flags choose the host;
``APCA_API_BASE_URL`` may only agree). One loop per ``--state-dir`` (an OS lock). Keys are never printed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Mapping

import typer
from rich.table import Table

from marketcast.console import console, progress_steps
from marketcast.errors import ConfigError
from marketcast.runtime.settings import ENV_FILE, parse_bool, read_env_file
from marketcast.trade.launch import open_venue, planner, resolve_command, setup_logging

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)

DEFAULT_SYMBOLS = "SP500,NASDAQ"
STATE_HELP = "folder for broker.db, journal.db, records.jsonl, trade.log"


def _symbols(text: str) -> tuple[str, ...]:
    out = tuple(s.strip().upper() for s in text.split(",") if s.strip())
    if not out:
        raise ConfigError("--symbols is empty; pass e.g. SP500,NASDAQ")
    return out


WEIGHTS_OPT = typer.Option(None, "--weights", help="toto/kronos weights: auto, a local folder, or random")
DEVICE_OPT = typer.Option("cpu", "--device", help="torch device for toto/kronos")


def add_latest_setting(flag: bool | None, env: Mapping[str, str] | None = None, path: str | Path = ENV_FILE) -> bool:
    """``--add-latest/--no-add-latest``, else ``ADD_LATEST`` from the environment, else from ``.env.compile``
    (the environment wins, as for the compile settings), else off. Parsed by the project's boolean rules:
    1/true/yes/on, 0/false/no/off; anything else is a :class:`ConfigError`."""
    if flag is not None:
        return flag
    env = os.environ if env is None else env
    if env.get("ADD_LATEST", "") != "":
        return parse_bool("ADD_LATEST", env["ADD_LATEST"], "environment")
    value = read_env_file(path).get("ADD_LATEST", "")
    return parse_bool("ADD_LATEST", value, str(path)) if value != "" else False


def _scratch_copy(state_dir: Path, scratch: Path) -> Path:
    """Copy the databases (with their write-ahead logs) of ``state_dir`` into ``scratch``, so a dry run can
    reconcile and advance the paper clock without creating or touching a file in ``state_dir``."""
    for name in ("broker.db", "journal.db"):
        for suffix in ("", "-wal"):
            src = state_dir / f"{name}{suffix}"
            if src.exists():
                shutil.copyfile(src, scratch / src.name)
    return scratch


def _config(symbols, fee, add_latest, mode, resolve: str | None = None):
    from marketcast.trade.cycle import RESOLVE, LoopConfig

    return LoopConfig(symbols=symbols, fee=fee, add_latest=add_latest, mode=mode, resolve=resolve or RESOLVE)


def _venue_flags(paper: bool, i_understand: bool, broker_name: str) -> tuple[str, bool]:
    """(broker, live) from the flags; live money needs both flags, and the host is checked against
    ``APCA_API_BASE_URL`` here, before any request or state file."""
    if not paper and not i_understand:
        raise ConfigError("--live trades real money; add --i-understand-live-trading to confirm")
    if not paper:
        broker_name = "alpaca"
    if broker_name not in ("paper", "alpaca"):
        raise ConfigError(f"--broker {broker_name!r}: choose paper or alpaca")
    if broker_name == "alpaca":
        from marketcast.trade.endpoints import data_url, trading_endpoint

        trading_endpoint(not paper, os.environ, warn=False)
        data_url(os.environ)
    return broker_name, not paper


def _print_plan(report, title: str) -> None:
    from marketcast.trade.cycle import describe

    table = Table(title=title)
    for col in ("symbol", "strategy", "side", "entry", "take profit", "edge", "sharpe", "qty", "client_order_id",
                "skipped because"):
        table.add_column(col)
    for r in describe(report):
        fmt = lambda v, f: "" if v is None else format(v, f)  # noqa: E731
        table.add_row(r["symbol"], r["strategy"], r["side"], fmt(r["entry"], ".2f"), fmt(r["take_profit"], ".2f"),
                      fmt(r["edge"], ".3%"), fmt(r["sharpe"], ".2f"), fmt(r["qty"], "g"), r["client_order_id"],
                      r["why_not"])
    console.print(table)


@app.command()
def run(
    paper: bool = typer.Option(True, "--paper/--live", help="paper (default) or live money"),
    i_understand: bool = typer.Option(False, "--i-understand-live-trading", help="required with --live"),
    broker_name: str = typer.Option("paper", "--broker", help="paper (embedded) or alpaca"),
    once: bool = typer.Option(False, "--once", help="run one cycle and exit"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the plan; submit nothing, write nothing"),
    symbols: str = typer.Option(DEFAULT_SYMBOLS, "--symbols"),
    state_dir: Path = typer.Option(Path("out/trade"), "--state-dir", help=STATE_HELP),
    model: str = typer.Option("baseline", "--model"),
    weights: str | None = WEIGHTS_OPT,
    device: str = DEVICE_OPT,
    data_dir: Path | None = typer.Option(None, "--data-dir", help="<SYMBOL>.csv files (paper broker)"),
    add_latest: bool | None = typer.Option(None, "--add-latest/--no-add-latest", show_default=False,
                                           help="real bid/ask from the broker (default: ADD_LATEST from the "
                                                "environment or .env.compile, else off)"),
    interval: float = typer.Option(60.0, "--interval", help="seconds between cycles without --once"),
    fee: float | None = typer.Option(None, "--fee"),
    seed: int = typer.Option(0, "--seed"),
    verbose: bool = typer.Option(False, "--verbose", "-v"),
) -> None:
    """Run the trading loop (paper by default)."""
    from marketcast.trade.lock import StateLock

    setup_logging(None, verbose)
    broker_name, live = _venue_flags(paper, i_understand, broker_name)
    args = (broker_name, live, once, _symbols(symbols), model, weights, device, data_dir,
            add_latest_setting(add_latest), interval, fee, seed)
    if not dry_run:
        with StateLock(state_dir):
            setup_logging(state_dir, verbose)
            _run_loop(state_dir, False, *args)
        return
    # read-only: the state is read from a scratch copy, nothing is written back
    with tempfile.TemporaryDirectory(prefix="marketcast-dry-run-") as scratch:
        _run_loop(_scratch_copy(state_dir, Path(scratch)) if state_dir.is_dir() else Path(scratch), True, *args,
                  resolve_dir=state_dir)


def _run_loop(state_dir: Path, dry_run: bool, broker_name: str, live: bool, once: bool, syms: tuple[str, ...],
              model: str, weights, device: str, data_dir, add_latest: bool, interval: float, fee, seed: int,
              resolve_dir: Path | None = None) -> None:
    from marketcast.trade.cycle import TradingLoop
    from marketcast.trade.monitor import Monitor
    from marketcast.trade.state import Journal

    journal = Journal(state_dir / "journal.db")  # first: a damaged journal stops the run before the broker moves
    plan = planner(model, seed, weights, device)
    venue = open_venue(broker_name, live, syms, state_dir, data_dir, fee)
    mode = "live" if live else "paper"
    resolve = resolve_command(resolve_dir or state_dir, broker_name, live, syms, data_dir)
    loop = TradingLoop(venue.broker, journal, plan, venue.feed,
                       _config(syms, fee, add_latest, mode, resolve), None if dry_run else Monitor(state_dir),
                       venue.asset_classes)
    while True:
        ts = venue.clock()
        if dry_run:
            _print_plan(loop.run_cycle(ts, dry_run=True), f"plan for the bar after {ts} (dry run, nothing sent)")
            return
        report = loop.run_cycle(ts)
        _print_plan(report, f"{mode} cycle at {ts} via {venue.broker.endpoint}")
        console.print(f"submitted {len(report.submitted)}, already there {len(report.already)}, "
                      f"rejected {len(report.rejected)}, refused {len(report.refused)}, "
                      f"equity {report.equity:,.2f}")
        if once:
            return
        time.sleep(interval)


@app.command("reconcile")
def reconcile_cmd(
    accept_broker: bool = typer.Option(False, "--accept-broker",
                                       help="make the journal agree with the broker: adopt the loop's orders it does "
                                            "not know, mark the orders the broker does not know as lost, set the "
                                            "loop's quantities to what the broker can hold, lift the halt"),
    paper: bool = typer.Option(True, "--paper/--live", help="the account to reconcile: paper (default) or live"),
    i_understand: bool = typer.Option(False, "--i-understand-live-trading", help="required with --live"),
    broker_name: str = typer.Option("paper", "--broker", help="paper (embedded) or alpaca"),
    symbols: str = typer.Option(DEFAULT_SYMBOLS, "--symbols", help="the symbols the loop trades (paper: the bars "
                                                                     "to load)"),
    state_dir: Path = typer.Option(Path("out/trade"), "--state-dir", help=STATE_HELP),
    data_dir: Path | None = typer.Option(None, "--data-dir", help="<SYMBOL>.csv files (paper broker)"),
    fee: float | None = typer.Option(None, "--fee", help="fee per side as a fraction (paper broker; default per "
                                                         "asset class)"),
) -> None:
    """Compare the journal with the broker; with --accept-broker adopt the broker's view and lift the halt."""
    from marketcast.trade.lock import StateLock
    from marketcast.trade.state import Journal

    setup_logging(None, False)
    broker_name, live = _venue_flags(paper, i_understand, broker_name)
    syms = _symbols(symbols)
    if not (state_dir / "journal.db").exists() and not accept_broker:
        raise ConfigError(f"{state_dir}: no journal.db; run `marketcast trade run` first, or reconcile with "
                          f"--accept-broker to start one from the broker")
    with StateLock(state_dir):
        setup_logging(state_dir, False)
        venue = open_venue(broker_name, live, syms, state_dir, data_dir, fee)
        journal = Journal(state_dir / "journal.db")
        from marketcast.trade.orders import OrderDesk
        from marketcast.trade.reconcile import Reconciled, Reconciler

        reconciler = Reconciler(venue.broker, journal, OrderDesk(venue.broker, journal),
                                resolve_command(state_dir, broker_name, live, syms, data_dir))
        if accept_broker:
            changes = reconciler.adopt()
            for line in changes or ["journal and broker already agree"]:
                console.print(f"- {line}", highlight=False)
            console.print(f"journal now agrees with {venue.broker.endpoint}; halt lifted")
            return
        disagreements = reconciler.compare("", Reconciled())
        if disagreements:
            raise reconciler.halt(disagreements)
        lifted = journal.halts.lift("reconcile", "trade reconcile (journal and broker agree)")
        console.print(f"journal and broker agree ({venue.broker.endpoint})" + ("; halt lifted" if lifted else ""))


@app.command()
def status(
    state_dir: Path = typer.Option(Path("out/trade"), "--state-dir", help=STATE_HELP),
    html: bool = typer.Option(False, "--html", help="also write STATE_DIR/status.html: equity, positions, open "
                                                    "orders, fills, alerts, latency and recompiles (opens offline)"),
) -> None:
    """Summarise the loop's records (JSON lines) and journal: endpoint, halts, orders, foreign holdings."""
    from marketcast.trade.monitor import read_records, summarise

    if not state_dir.exists():
        raise ConfigError(f"{state_dir}: no such state dir; run `marketcast trade run` or `replay` first")
    if html:
        from marketcast.report.live import PAGE_NAME, read_state, status_html
        from marketcast.report.page import write_page

        write_page(state_dir / PAGE_NAME, status_html(read_state(state_dir)))
    records = read_records(state_dir)
    summary = summarise(records)
    table = Table(title=f"trade status: {state_dir}")
    table.add_column("what")
    table.add_column("value")
    for k, v in summary.items():
        table.add_row(k, f"{v:,.2f}" if isinstance(v, float) else str(v))
    if records and records[-1].get("foreign"):
        table.add_row("foreign (untouched)", "; ".join(
            f"{s}: position {f['position']:g}, orders {', '.join(f['orders']) or 'none'}"
            for s, f in records[-1]["foreign"].items()))
    journal = state_dir / "journal.db"
    if journal.exists():
        from marketcast.trade.state import Journal

        j = Journal(journal)
        meta = j.meta()
        if meta:
            table.add_row("bound to", f"account {meta.get('account_id')} at {meta.get('endpoint')}")
        counts: dict[str, int] = {}
        for i in j.intents():
            counts[i.status] = counts.get(i.status, 0) + 1
        table.add_row("journal intents", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none")
        table.add_row("journal fills", str(len(j.fills())))
        for i in [i for i in j.intents() if i.status in ("refused", "rejected")][-3:]:
            table.add_row(f"{i.status} {i.client_order_id}", f"{i.symbol} {i.decision_ts[:10]}: {i.error}")
        halts = j.halts.active()
        table.add_row("halted", "no" if not halts else "\n".join(h.message() for h in halts))
        j.close()
    console.print(table)
    if html:
        console.print(f"status page: {state_dir / PAGE_NAME}", highlight=False)


@app.command("replay")
def replay_cmd(
    start: str = typer.Option(..., "--from", help="first decision date, e.g. 2017-01-01"),
    end: str = typer.Option(..., "--to", help="last date settled, e.g. 2017-12-31"),
    symbols: str = typer.Option(DEFAULT_SYMBOLS, "--symbols"),
    state_dir: Path | None = typer.Option(None, "--state-dir", help=STATE_HELP + " (default out/replay-FROM-TO)"),
    model: str = typer.Option("baseline", "--model"),
    weights: str | None = WEIGHTS_OPT,
    device: str = DEVICE_OPT,
    data_dir: Path | None = typer.Option(None, "--data-dir"),
    fee: float | None = typer.Option(None, "--fee"),
    cash: float = typer.Option(100_000.0, "--cash"),
    png: Path | None = typer.Option(None, "--png", help="equity curve (default STATE_DIR/equity.png)"),
    seed: int = typer.Option(0, "--seed"),
    verbose: bool = typer.Option(False, "--verbose", "-v"),
) -> None:
    """Run the loop with the paper broker over history (resumable: same --state-dir carries on)."""
    from marketcast.data import load_symbol
    from marketcast.trade.monitor import read_records, summarise
    from marketcast.trade.replay import replay, replay_dates

    from marketcast.trade.lock import StateLock

    syms = _symbols(symbols)
    state_dir = state_dir or Path(f"out/replay-{start}-{end}")
    bars = {s: load_symbol(s, data_dir) for s in syms}
    dates = replay_dates(bars, start, end)
    started = time.perf_counter()
    with StateLock(state_dir), progress_steps(len(dates) - 1, "replay") as step:
        setup_logging(state_dir, verbose)
        result = replay(bars, planner(model, seed, weights, device), state_dir, start, end,
                        _config(syms, fee, False, "replay", resolve_command(state_dir, "paper", False, syms, data_dir)),
                        starting_cash=cash, png=png or state_dir / "equity.png", on_step=step)
    s = summarise(read_records(state_dir))
    eq = result.equity
    console.print(
        f"replay {start} .. {end} {','.join(syms)}: {result.cycles_run} cycles run in "
        f"{time.perf_counter() - started:.1f}s; orders {result.orders}, filled {s.get('orders_filled', 0)}; "
        f"equity {eq.iloc[0]:,.2f} -> {eq.iloc[-1]:,.2f} ({eq.iloc[-1] / cash - 1:+.2%})"
    )
    console.print(f"equity curve: {result.png}\nrecords: {state_dir / 'records.jsonl'}")
