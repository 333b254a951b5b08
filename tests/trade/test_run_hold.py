"""``hold`` is a setting of ``trade run`` as of the backtest and the replay (issue 53, item 3): ``--hold`` (or
``hold = true`` in the config's trade table) makes the loop hold a position while the next decision stays on its
side, on the paper broker that holds as Alpaca does; the state folder keeps the setting it was made with.

Judged on a crypto symbol (24/7 daily bars, a strategy pinned so every day decides): ``trade run --once`` stepped
a day at a time by its clock file sends the orders that ``trade replay`` over the same days sends, with and without
``--hold``; with ``--hold`` some decision is held instead of being closed and entered again."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from marketcast.trade.journal.state import Journal

from .helpers import trade_main
from .test_cli import crypto_bars

GATES = ('[trade]\nsymbols = ["ETHUSD"]\n[trade.gates]\nmin_edge = -1\nmin_sharpe = -1e9\nmax_drawdown = 1.01\n'
         '[trade.strategy]\nETHUSD = "simple"\n')
DAYS = pd.date_range("2017-02-20", "2017-03-09", freq="D", tz="UTC")  # decision bars: each UTC day


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hold")
    (root / "data").mkdir()
    crypto_bars(root / "data", "ETHUSD", "2017-03-10")
    (root / "config.toml").write_text(GATES)
    return root


def orders(state: Path) -> list[tuple]:
    """What the loop sent, in order: (decision bar, kind, side, quantity)."""
    journal = Journal(state / "journal.db")
    try:
        return [(i.decision_ts[:10], i.kind, i.side, round(i.qty, 8)) for i in journal.intents()
                if i.status == "submitted"]
    finally:
        journal.close()


def stepped_run(folder: Path, state: Path, hold: list[str]) -> list[tuple]:
    clock = folder / f"clock-{state.name}"
    for day in DAYS:
        clock.write_text((day + pd.Timedelta(days=1, minutes=30)).isoformat())  # the day's bar is complete
        code = trade_main(["run", "--once", "--config", str(folder / "config.toml"), "--data-dir",
                           str(folder / "data"), "--state-dir", str(state), "--clock-file", str(clock), *hold])
        assert code == 0, day
    return orders(state)


def replayed(folder: Path, state: Path, hold: list[str]) -> list[tuple]:
    code = trade_main(["replay", "--start", DAYS[0].date().isoformat(), "--end", "2017-03-10", "--config",
                       str(folder / "config.toml"), "--data-dir", str(folder / "data"), "--state-dir", str(state),
                       *hold])
    assert code == 0
    return orders(state)


@pytest.mark.parametrize("hold", [["--hold"], []], ids=["hold", "churn"])
def test_a_stepped_trade_run_sends_the_replays_orders(folder, tmp_path, hold):
    run = stepped_run(folder, tmp_path / "run", hold)
    assert run == replayed(folder, tmp_path / "replay", hold)
    assert sum(kind == "entry" for _, kind, _, _ in run) >= (1 if hold else 3), run  # churn: entered again


def test_hold_keeps_a_position_the_churning_run_closes_and_enters_again(folder, tmp_path):
    held, churned = stepped_run(folder, tmp_path / "held", ["--hold"]), stepped_run(folder, tmp_path / "churn", [])
    entries = lambda sent: [day for day, kind, _, _ in sent if kind == "entry"]  # noqa: E731
    assert set(entries(held)) < set(entries(churned)), (held, churned)  # an agreeing decision enters nothing


def test_the_config_holds_and_a_folder_keeps_its_setting(folder, tmp_path, capsys):
    config = tmp_path / "hold.toml"
    config.write_text(GATES.replace("[trade]\n", "[trade]\nhold = true\n"))
    clock = tmp_path / "clock"
    clock.write_text((DAYS[0] + pd.Timedelta(days=1, minutes=30)).isoformat())
    state = tmp_path / "st"
    common = ["--data-dir", str(folder / "data"), "--state-dir", str(state), "--clock-file", str(clock)]
    assert trade_main(["run", "--once", "--config", str(config), *common]) == 0
    journal = Journal(state / "journal.db")
    assert journal.meta()["hold"] == "yes"
    journal.close()
    capsys.readouterr()
    assert trade_main(["run", "--once", "--config", str(folder / "config.toml"), *common]) == 2
    out = capsys.readouterr()
    assert out.err.strip() == (f"error: {state} was made with --hold; run it with --hold as it was made, or use a "
                               "new state folder")
