"""``marketcast trade run | status | replay``.

Paper (the embedded SQLite broker) is the default. Alpaca needs ``--broker alpaca`` and keys in the
environment; live money needs ``--live`` *and* ``--i-understand-live-trading``. Keys are never printed.
"""

from __future__ import annotations

import logging
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

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)

DEFAULT_SYMBOLS = "SP500,NASDAQ"
STATE_HELP = "folder for broker.db, journal.db, records.jsonl, trade.log"


def _symbols(text: str) -> tuple[str, ...]:
    out = tuple(s.strip().upper() for s in text.split(",") if s.strip())
    if not out:
        raise ConfigError("--symbols is empty; pass e.g. SP500,NASDAQ")
    return out


def _setup_logging(state_dir: Path | None, verbose: bool) -> None:
    """stderr, plus ``state_dir/trade.log`` unless ``state_dir`` is None (a dry run writes no file)."""
    from marketcast.trade.alpaca import RedactingFilter

    logger = logging.getLogger("marketcast")
    logger.setLevel(logging.INFO)
    for h in list(logger.handlers):
        if getattr(h, "_marketcast_trade", False):
            logger.removeHandler(h)
    stream = logging.StreamHandler()
    stream.setLevel(logging.INFO if verbose else logging.WARNING)
    handlers = [stream]
    if state_dir is not None:
        state_dir.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(state_dir / "trade.log", encoding="utf-8"))
    for h in handlers:
        h._marketcast_trade = True
        h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        h.addFilter(RedactingFilter())
        logger.addHandler(h)


def _planner(model: str, seed: int, weights: str | None = None, device: str = "cpu"):
    from dataclasses import replace

    from marketcast.forecast import load_forecaster
    from marketcast.trade.planner import PLANNER_CONFIG, BacktestPlanner

    forecaster = load_forecaster(model, weights=weights, device=device, seed=seed)
    return BacktestPlanner(forecaster, replace(PLANNER_CONFIG, seed=seed))


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


def _config(symbols, fee, add_latest, mode, bars=None):
    from marketcast.trade.cycle import LoopConfig

    return LoopConfig(symbols=symbols, fee=fee, add_latest=add_latest, mode=mode)


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
    if not paper and not i_understand:
        raise ConfigError("--live trades real money; add --i-understand-live-trading to confirm")
    if not paper:
        broker_name = "alpaca"
    if broker_name not in ("paper", "alpaca"):
        raise ConfigError(f"--broker {broker_name!r}: choose paper or alpaca")
    args = (broker_name, paper, once, _symbols(symbols), model, weights, device, data_dir,
            add_latest_setting(add_latest), interval, fee, seed)
    if not dry_run:
        _setup_logging(state_dir, verbose)
        _run_loop(state_dir, False, *args)
        return
    _setup_logging(None, verbose)  # read-only: the state is read from a scratch copy, nothing is written back
    with tempfile.TemporaryDirectory(prefix="marketcast-dry-run-") as scratch:
        _run_loop(_scratch_copy(state_dir, Path(scratch)) if state_dir.is_dir() else Path(scratch), True, *args)


def _run_loop(state_dir: Path, dry_run: bool, broker_name: str, paper: bool, once: bool, syms: tuple[str, ...],
              model: str, weights, device: str, data_dir, add_latest: bool, interval: float, fee, seed: int) -> None:
    from marketcast.trade.cycle import TradingLoop
    from marketcast.trade.monitor import Monitor
    from marketcast.trade.state import Journal

    planner = _planner(model, seed, weights, device)
    if broker_name == "paper":
        from marketcast.data import load_symbol
        from marketcast.trade.feed import history_feed
        from marketcast.trade.paper import PaperBroker

        bars = {s: load_symbol(s, data_dir) for s in syms}
        last = min(b.frame.index[-1] for b in bars.values())
        broker = PaperBroker(state_dir / "broker.db", bars, fee=fee, start=last)
        feed = history_feed(bars, lambda: broker.clock)
        classes = {s: b.asset_class for s, b in bars.items()}
        clock = lambda: (broker.advance_to(max(b.frame.index[-1] for b in bars.values())), broker.clock)[1]  # noqa
    else:
        from marketcast.data import infer_asset_class
        from marketcast.trade.alpaca import AlpacaBroker
        from marketcast.trade.feed import broker_feed

        classes = {s: infer_asset_class(s) for s in syms}
        broker = AlpacaBroker.from_env(paper=paper, asset_classes=classes)
        feed = broker_feed(broker, classes)
        clock = lambda: max(feed(s).frame.index[-1] for s in syms).isoformat()  # noqa: E731
    mode = "live" if not paper else "paper"
    loop = TradingLoop(broker, Journal(state_dir / "journal.db"), planner, feed,
                       _config(syms, fee, add_latest, mode), None if dry_run else Monitor(state_dir), classes)
    while True:
        ts = clock()
        if dry_run:
            _print_plan(loop.run_cycle(ts, dry_run=True), f"plan for the bar after {ts} (dry run, nothing sent)")
            return
        report = loop.run_cycle(ts)
        _print_plan(report, f"{mode} cycle at {ts}")
        console.print(f"submitted {len(report.submitted)}, already there {len(report.already)}, "
                      f"rejected {len(report.rejected)}, equity {report.equity:,.2f}")
        if once:
            return
        time.sleep(interval)


@app.command()
def status(state_dir: Path = typer.Option(Path("out/trade"), "--state-dir", help=STATE_HELP)) -> None:
    """Summarise the loop's records (JSON lines) and journal."""
    from marketcast.trade.monitor import read_records, summarise

    if not state_dir.exists():
        raise ConfigError(f"{state_dir}: no such state dir; run `marketcast trade run` or `replay` first")
    summary = summarise(read_records(state_dir))
    table = Table(title=f"trade status: {state_dir}")
    table.add_column("what")
    table.add_column("value")
    for k, v in summary.items():
        table.add_row(k, f"{v:,.2f}" if isinstance(v, float) else str(v))
    journal = state_dir / "journal.db"
    if journal.exists():
        from marketcast.trade.state import Journal

        j = Journal(journal)
        counts: dict[str, int] = {}
        for i in j.intents():
            counts[i.status] = counts.get(i.status, 0) + 1
        table.add_row("journal intents", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none")
        table.add_row("journal fills", str(len(j.fills())))
        j.close()
    console.print(table)


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

    syms = _symbols(symbols)
    state_dir = state_dir or Path(f"out/replay-{start}-{end}")
    _setup_logging(state_dir, verbose)
    bars = {s: load_symbol(s, data_dir) for s in syms}
    started = time.perf_counter()
    with progress_steps(len(replay_dates(bars, start, end)) - 1, "replay") as step:
        result = replay(bars, _planner(model, seed, weights, device), state_dir, start, end,
                        _config(syms, fee, False, "replay"), starting_cash=cash, png=png or state_dir / "equity.png",
                        on_step=step)
    s = summarise(read_records(state_dir))
    eq = result.equity
    console.print(
        f"replay {start} .. {end} {','.join(syms)}: {result.cycles_run} cycles run in "
        f"{time.perf_counter() - started:.1f}s; orders {result.orders}, filled {s.get('orders_filled', 0)}; "
        f"equity {eq.iloc[0]:,.2f} -> {eq.iloc[-1]:,.2f} ({eq.iloc[-1] / cash - 1:+.2%})"
    )
    console.print(f"equity curve: {result.png}\nrecords: {state_dir / 'records.jsonl'}")
