"""``trade run``: a dry run reads the state but writes nothing; ADD_LATEST follows the project's boolean rules and
the settings' layers, and is on by default only where the broker has quotes."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from marketcast.data import load_symbol
from marketcast.errors import ConfigError
from marketcast.settings import resolve
from marketcast.commands.trade_settings import SECTION, SETTINGS
from marketcast.trade.ops.monitor import read_records
from marketcast.trade.journal.state import Journal

SRC = str(Path(__file__).resolve().parents[2] / "src")
RUN = [sys.executable, "-m", "marketcast.commands", "trade", "run", "--symbols", "SP500,NASDAQ"]


def trade(args: list[str], cwd: Path, run: list[str] = RUN, **env) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "ADD_LATEST"}
    return subprocess.run([*run, *args], capture_output=True, text=True, cwd=cwd, timeout=120,
                          env={**base, "PYTHONPATH": SRC, "COLUMNS": "250", **env})


def files(folder: Path) -> dict[str, tuple[int, int, str]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(folder.iterdir())}


def test_dry_run_prints_the_plan_and_creates_or_changes_no_file(tmp_path):
    data, state, clock = tmp_path / "data", tmp_path / "state", tmp_path / "clock"
    data.mkdir()
    for sym in ("SP500", "NASDAQ"):  # history up to a bar whose signals pass the default gates
        load_symbol(sym).frame.loc[:"2018-07-20"].to_csv(data / f"{sym}.csv")
    clock.write_text("2018-07-20T21:30:00Z")  # "now": after that Friday's close, so the data is fresh
    common = ["--data-dir", str(data), "--state-dir", str(state), "--clock-file", str(clock)]
    fresh = trade(["--dry-run", "-v", *common], tmp_path, ADD_LATEST="no")
    assert fresh.returncode == 0, fresh.stderr
    assert "dry run, nothing sent" in fresh.stdout and "2018-07-20" in fresh.stdout
    planned = re.findall(r"mc-[0-9a-f]{24}", fresh.stdout)
    assert len(planned) >= 1 and not state.exists()  # not even the state folder
    assert fresh.stderr.count("(ADD_LATEST off)") == 2  # "no" is off: one synthetic quote per symbol

    once = trade(["--once", *common], tmp_path)
    assert once.returncode == 0, once.stderr
    assert re.findall(r"mc-[0-9a-f]{24}", once.stdout) == planned and f"submitted {len(planned)}," in once.stdout
    before = files(state)
    assert {"broker.db", "journal.db", "records.jsonl", "trade.log"} <= set(before)
    (tmp_path / ".env.compile").write_text("ADD_LATEST=yes\n")
    dry = trade(["--dry-run", "-v", *common], tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert files(state) == before  # same names, sizes, mtimes and bytes: nothing created or modified
    assert "(ADD_LATEST off)" not in dry.stderr  # on, from .env.compile (the paper broker's quotes are used)
    # planned from the reconciled state: the orders the real cycle journalled for this bar are re-derived
    # as the same orders (a dry run blind to the journal would count them as held and plan nothing)
    assert re.findall(r"mc-[0-9a-f]{24}", dry.stdout) == planned and "dry run, nothing sent" in dry.stdout


def add_latest(env: dict, path: Path, flags: dict | None = None):
    return resolve(SETTINGS, SECTION, env_file=path, env=env, flags=flags)["add_latest"]


def test_add_latest_parses_booleans_from_flag_environment_and_env_file(tmp_path):
    from marketcast.runtime import compile_settings
    from marketcast import settings

    assert compile_settings.read_env_file is settings.read_env_file  # one parser of .env.compile
    path = tmp_path / ".env.compile"
    assert add_latest({}, path) is None  # auto: on where the broker has quotes
    for value, want in [("1", True), ("true", True), ("YES", True), ("on", True),
                        ("0", False), ("false", False), ("no", False), ("off", False)]:
        assert add_latest({"ADD_LATEST": value}, path) is want, value
        assert add_latest({"MARKETCAST_TRADE_ADD_LATEST": value}, path) is want, value
    path.write_text("# trading\nexport ADD_LATEST=on\n")
    assert add_latest({}, path) is True
    assert add_latest({"ADD_LATEST": "off"}, path) is False  # the environment wins
    assert add_latest({"ADD_LATEST": ""}, path) is True  # empty is unset
    assert add_latest({"ADD_LATEST": "on"}, path, {"add_latest": False}) is False  # the flag wins over both
    with pytest.raises(ConfigError, match=r"add_latest = 'maybe' \(ADD_LATEST\) is not a boolean"):
        add_latest({"ADD_LATEST": "maybe"}, path)
    path.write_text("ADD_LATEST=2\n")
    with pytest.raises(ConfigError, match=r"add_latest = '2' \(ADD_LATEST in .*\.env\.compile\) is not a boolean"):
        add_latest({}, path)


def test_cli_bad_add_latest_is_one_line_and_exit_2(tmp_path):
    bad = trade(["--dry-run", "--state-dir", str(tmp_path / "state")], tmp_path, ADD_LATEST="sometimes")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        "error: add_latest = 'sometimes' (ADD_LATEST) is not a boolean; use one of "
        "['1', 'on', 'true', 'yes'] or ['0', 'false', 'no', 'off']"]
    assert list(tmp_path.iterdir()) == []


def crypto_bars(folder: Path, symbol: str, end: str, scale: float = 1.0) -> None:
    """400 daily bars ending ``end`` on a 24x7 calendar (NASDAQ's prices times ``scale`` to 5 significant
    digits, one a day): a crypto symbol to trade."""
    frame = load_symbol("NASDAQ").frame.loc[:end].tail(400).copy()
    if scale != 1.0:
        prices = ["open", "high", "low", "close"]
        frame[prices] = (frame[prices] * scale).round(5)
    frame.index = pd.date_range(end=end, periods=len(frame), freq="D", tz="UTC", name="timestamp")
    frame.to_csv(folder / f"{symbol}.csv")


def test_a_pinned_strategy_trades_regardless_of_the_walk_forward_pick(tmp_path):
    data, state, clock = tmp_path / "data", tmp_path / "state", tmp_path / "clock"
    data.mkdir()
    crypto_bars(data, "ETHUSD", "2017-03-10")
    clock.write_text("2017-03-11T00:30:00Z")  # the bar of 03-10 (UTC day) is complete
    gates = '[trade]\nsymbols = ["ETHUSD"]\n[trade.gates]\nmin_edge = -1\nmin_sharpe = -1e9\nmax_drawdown = 1.01\n'
    (tmp_path / "picked.toml").write_text(gates)
    (tmp_path / "pinned.toml").write_text(gates + '[trade.strategy]\nETHUSD = "maxdiff"\n')
    common = ["--data-dir", str(data), "--state-dir", str(state), "--clock-file", str(clock)]
    picked = trade(["--config", "picked.toml", "--dry-run", *common], tmp_path, RUN[:-2])  # symbols: the file's
    assert picked.returncode == 0, picked.stderr
    # the walk-forward pick: the backtest's rule over the 70 windows up to the decision bar (min_trades 10;
    # ci_guard, flat, led while one trade was enough)
    from marketcast.backtest import run_backtest
    from marketcast.forecast import load_forecaster
    from marketcast.trade.loop.planner import PLANNER_CONFIG

    bt = run_backtest(load_symbol("ETHUSD", data), load_forecaster("baseline"), replace(PLANNER_CONFIG, exit="close"))
    pick = PLANNER_CONFIG.selection.pick({n: r.returns for n, r in bt.strategies.items()},
                                         {n: r.filled for n, r in bt.strategies.items()})
    assert pick not in (None, "maxdiff") and bt.strategies[pick].metrics["trades"] >= 10
    assert re.search(rf"│ ETHUSD │ {pick} +│ ", picked.stdout), (pick, picked.stdout)
    pinned = trade(["--config", "pinned.toml", "--once", *common], tmp_path, RUN[:-2])
    assert pinned.returncode == 0, pinned.stderr
    assert re.search(r"│ ETHUSD │ maxdiff \(pinned\) │ long ", pinned.stdout), pinned.stdout
    journal = Journal(state / "journal.db")
    intents = [(i.symbol, i.strategy, i.side, i.status) for i in journal.intents()]
    journal.close()
    assert intents == [("ETHUSD", "maxdiff", "buy", "submitted")]
    record = read_records(state)[-1]
    assert record["chosen"]["ETHUSD"]["strategy"] == "maxdiff" and record["chosen"]["ETHUSD"]["pinned"] is True
    # the state folder is its owner's alone: the folder 0700, every file in it 0600
    assert state.stat().st_mode & 0o777 == 0o700
    modes = {p.name: p.stat().st_mode & 0o777 for p in state.iterdir()}
    assert {"journal.db", "broker.db", "records.jsonl", "trade.log", "loop.lock"} <= set(modes)
    assert set(modes.values()) == {0o600}, modes


def test_every_option_of_run_and_replay_has_help_and_the_shared_ones_match_the_backtests():
    import typer

    from marketcast.commands.backtest import backtest
    from marketcast.commands.trade import app

    commands = typer.main.get_command(app).commands
    backtest_app = typer.Typer()
    backtest_app.command()(backtest)
    shared = {p.opts[0]: p for p in typer.main.get_command(backtest_app).params}
    for name in ("run", "replay"):
        params = {p.opts[0]: p for p in commands[name].params if p.param_type_name == "option"}
        assert [o for o, p in params.items() if not (p.help or "").strip()] == [], name
        for flag in ("--model", "--weights", "--device", "--dtype", "--seed", "--data-dir", "--on-duplicate",
                     "--asset-class", "--periods-per-year"):
            assert params[flag].help.startswith(shared[flag].help), (name, flag)  # the same text
            assert params[flag].opts == shared[flag].opts, (name, flag)  # the same names (-m for --model)
    assert commands["replay"].params[0].opts == ["--start", "--from"]  # like data fetch; --from still works


@pytest.mark.parametrize("args, says", [
    (["--seed", "-1"], "Invalid value for '--seed': Input should be greater than or equal to 0"),
    (["--device", "gpu"], "'gpu' is not a torch device; use cpu, cuda, cuda:N or mps"),
    (["--dtype", "float16"], "'float16' is not one of 'float32', 'bfloat16'"),
    (["--on-duplicate", "sum"], "'sum' is not one of 'error', 'first', 'last'"),
    (["--model", "gpt"], "unknown model 'gpt'; choose one of baseline, toto, kronos"),  # the model loads first
    (["--start", "2017-02-30"], "--start '2017-02-30' is not a date (day is out of range for month"),
])
def test_a_replay_that_fails_validation_writes_nothing(tmp_path, capsys, args, says):
    from marketcast.commands import main

    state = tmp_path / "state"
    base = {"--start": "2017-01-02", "--end": "2017-02-01"}
    for flag, value in zip(args[::2], args[1::2]):
        base[flag] = value
    code = main(["trade", "replay", "--state-dir", str(state), *[x for kv in base.items() for x in kv]])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and says in err, err
    assert not state.exists()  # no folder, no empty trade.log, no lock


def test_the_plan_prints_prices_with_the_symbols_tick_decimals(tmp_path):
    data, clock = tmp_path / "data", tmp_path / "clock"
    data.mkdir()
    crypto_bars(data, "ETHUSD", "2017-03-10", scale=1e-4)  # a coin quoted to 1e-5: 0.58174
    clock.write_text("2017-03-11T00:30:00Z")
    (tmp_path / "pinned.toml").write_text('[trade]\nsymbols = ["ETHUSD"]\n[trade.gates]\nmin_edge = -1\n'
                                          'min_sharpe = -1e9\nmax_drawdown = 1.01\n[trade.strategy]\n'
                                          'ETHUSD = "maxdiff"\n')
    dry = trade(["--config", "pinned.toml", "--dry-run", "--data-dir", str(data), "--state-dir",
                 str(tmp_path / "state"), "--clock-file", str(clock)], tmp_path, RUN[:-2])
    assert dry.returncode == 0, dry.stderr
    entry, take_profit = re.search(r"│ ETHUSD │ maxdiff \(pinned\) │ long │ (\S+) +│ (\S+) ", dry.stdout).groups()
    assert re.fullmatch(r"0\.\d{5}", entry) and re.fullmatch(r"0\.\d{5}", take_profit), (entry, take_profit)
    assert float(entry) < float(take_profit)


def test_run_takes_the_asset_class_and_periods_per_year_as_every_command_that_reads_bars_does(tmp_path):
    """``--asset-class`` reaches the bars the loop trades (forex is refused before any order, naming each symbol),
    ``--periods-per-year`` must be positive, and both show in --print-config with where they came from."""
    data, clock = tmp_path / "data", tmp_path / "clock"
    data.mkdir()
    for sym in ("SP500", "NASDAQ"):
        load_symbol(sym).frame.loc[:"2018-07-20"].to_csv(data / f"{sym}.csv")
    clock.write_text("2018-07-20T21:30:00Z")
    common = ["--data-dir", str(data), "--state-dir", str(tmp_path / "state"), "--clock-file", str(clock)]
    forex = trade(["--dry-run", "--asset-class", "forex", *common], tmp_path)
    assert forex.returncode == 2 and forex.stderr.count("\n") == 1, forex.stderr
    assert "NASDAQ (forex), SP500 (forex): the loop trades stock and crypto only" in forex.stderr
    one = trade(["--dry-run", "--asset-class", "NASDAQ=forex", *common], tmp_path)
    assert one.returncode == 2 and "NASDAQ (forex):" in one.stderr and "SP500 (" not in one.stderr, one.stderr
    zero = trade(["--dry-run", "--periods-per-year", "0", *common], tmp_path)
    assert zero.returncode == 2 and "periods" in zero.stderr and zero.stderr.count("\n") == 1, zero.stderr
    shown = trade(["--print-config", "--periods-per-year", "300", "--asset-class", "stock"], tmp_path,
                  MARKETCAST_TRADE_DATA_ASSET_CLASS="crypto")
    assert shown.returncode == 0, shown.stderr
    rows = {cells[0]: cells[1:3] for cells in ([c.strip() for c in line.split("│")[1:]]
                                                for line in shown.stdout.splitlines() if "│" in line)}
    assert rows["data.periods_per_year"] == ["300", "flag"] and rows["data.asset_class"] == ["stock", "flag"], rows
