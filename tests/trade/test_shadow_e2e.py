"""The shadow loop end to end, through `trade run`'s own code path on the paper broker: live = baseline, shadow =
Toto 2.0 with random 4m weights (`--shadow-model toto2 --shadow random:4m`), a few daily cycles over the
embedded bars; `trade status` scores both, `trade promote` decides with its statistics, and a promoted model of
another kind is the one the next `trade run` trades with."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from jsonschema import Draft202012Validator

from marketcast.backtest.orders import Costs
from marketcast.commands import main
from marketcast.data import load_symbol
from marketcast.trade.journal import sequential
from marketcast.trade.journal.state import Journal
from marketcast.trade.loop.planner import CLOSE_LEVELS
from marketcast.trade.loop.shadow import compare, swap
from marketcast.schemas import load as load_schema

SYMS = ("SP500", "NASDAQ")
OPEN_GATES = "[trade.gates]\nmin_edge = -1.0\nmin_sharpe = -1000000000.0\nmax_drawdown = 1.01\n"
CYCLES = 3  # 2 settled bars x 2 symbols = 4 paired decisions


def schema(name: str) -> Draft202012Validator:
    return Draft202012Validator(load_schema(name))


class Desk:
    """A data folder, a clock file and a state folder: `trade run --once` on each day as the market would see it
    (the day's bar in the CSV, 'now' after its close)."""

    def __init__(self, root: Path, full: dict) -> None:
        self.data, self.clock, self.state, self.full = root / "data", root / "clock", root / "state", full
        self.data.mkdir(parents=True)
        (root / "open.toml").write_text(OPEN_GATES)
        self.common = ["--symbols", ",".join(SYMS), "--data-dir", str(self.data), "--state-dir", str(self.state),
                       "--clock-file", str(self.clock), "--config", str(root / "open.toml")]

    def run(self, day, *flags: str) -> int:
        for s, frame in self.full.items():
            frame.loc[:day].to_csv(self.data / f"{s}.csv")
        self.clock.write_text((day + pd.Timedelta(hours=21, minutes=30)).isoformat())
        return main(["trade", "run", "--once", *self.common, *flags])

    def submits(self) -> list[tuple]:
        conn = sqlite3.connect(self.state / "broker.db")
        try:
            return conn.execute("SELECT client_order_id, outcome FROM submit_log ORDER BY n").fetchall()
        finally:
            conn.close()


def energy_crps(q: np.ndarray, y: float) -> float:
    """E|X - y| - E|X - X'| / 2 over the 25 journalled quantiles as equally weighted members (Gneiting & Raftery
    2007, eq. 21): at the midpoint levels this is the quantile CRPS status reports, computed another way."""
    return float(np.abs(q - y).mean() - 0.5 * np.abs(q[:, None] - q[None, :]).mean())


def test_baseline_live_toto2_shadow_through_trade_run_status_and_promote(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no marketcast.toml or .env.compile of the checkout
    monkeypatch.delenv("ADD_LATEST", raising=False)
    full = {s: load_symbol(s).frame for s in SYMS}
    days = full["SP500"].loc["2018-07-02":].index[:CYCLES]
    with_shadow, plain = Desk(tmp_path / "shadow", full), Desk(tmp_path / "plain", full)
    for day in days:
        assert with_shadow.run(day, "--shadow-model", "toto2", "--shadow", "random:4m") == 0
        assert plain.run(day) == 0
    # the live model's orders are those of a run without a shadow, and there are some
    assert with_shadow.submits() == plain.submits() and len(plain.submits()) > 0

    journal = Journal(with_shadow.state / "journal.db")
    rows = journal.conn.execute("SELECT decision_ts, symbol, role, model, forecaster, side, quantiles, pnl, ret, "
                                "cost FROM shadow_decisions ORDER BY decision_ts, symbol, role").fetchall()
    assert len(rows) == 2 * len(SYMS) * CYCLES
    assert {(r[2], r[3], r[4]) for r in rows} == {("live", "baseline (default weights)", "baseline"),
                                                  ("shadow", "random:4m", "toto2")}
    settled = [r for r in rows if r[8] is not None]
    assert len(settled) == 2 * len(SYMS) * (CYCLES - 1)
    score = {"live": [], "shadow": []}
    pnl = {"live": [], "shadow": []}
    daily: dict[str, float] = {}  # shadow - live after costs, the day's symbols summed: what promote tests
    costs = {s: Costs.for_asset(b.asset_class, periods_per_year=b.periods_per_year)
             for s, b in ((s, load_symbol(s)) for s in SYMS)}
    for ts, symbol, role, _, _, side, quantiles, p, ret, cost in settled:
        frame = full[symbol]
        i = frame.index.get_loc(pd.Timestamp(ts))
        y = frame["close"].iloc[i + 1] / frame["close"].iloc[i] - 1
        assert ret == pytest.approx(y, rel=1e-12) and p == pytest.approx(side * y, rel=1e-12)
        q = json.loads(quantiles)
        assert q["levels"] == pytest.approx(CLOSE_LEVELS) and np.all(np.diff(q["values"]) >= 0)
        score[role].append(energy_crps(np.array(q["values"]), y))
        pnl[role].append(side * y)
        assert cost == pytest.approx(costs[symbol].round_trip(side) if side else 0.0, rel=1e-12)
        daily[ts[:10]] = daily.get(ts[:10], 0.0) + (1 if role == "shadow" else -1) * (side * y - cost)
    journal.close()

    capsys.readouterr()
    assert main(["trade", "status", "--state-dir", str(with_shadow.state), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    schema("trade_status").validate(status)
    shown = status["shadow"]
    n = len(SYMS) * (CYCLES - 1)
    assert shown["weights"] == "random:4m" and shown["model"] == "toto2" and shown["errors"] is None
    assert shown["decisions"] == shown["scored"] == n
    assert shown["live_crps"] == pytest.approx(np.mean(score["live"]), rel=1e-9)
    assert shown["shadow_crps"] == pytest.approx(np.mean(score["shadow"]), rel=1e-9)
    assert shown["live_pnl"] == pytest.approx(sum(pnl["live"])) and shown["shadow_pnl"] == pytest.approx(sum(pnl["shadow"]))
    assert 0 <= shown["live_coverage_80"] <= 1 and 0 <= shown["shadow_coverage_80"] <= 1
    assert main(["trade", "status", "--state-dir", str(with_shadow.state)]) == 0
    table = " ".join(capsys.readouterr().out.split())
    assert "shadow random:4m" in table and f"on {n} settled bars" in table

    code = main(["trade", "promote", "--state-dir", str(with_shadow.state), "--min-decisions", str(n), "--json"])
    decision = json.loads(capsys.readouterr().out)
    schema("trade_promote").validate(decision)
    test = sequential.evaluate(list(daily.values()), 0.05)
    assert decision["n"] == n and decision["days"] == CYCLES - 1 and decision["test"] == sequential.NAME
    assert decision["mean_diff"] == pytest.approx(np.mean(list(daily.values())), rel=1e-9)
    assert decision["e_value"] == pytest.approx(test.e_value, rel=1e-9) and decision["threshold"] == 20.0
    assert decision["interval"] == [None if np.isinf(x) else pytest.approx(x, rel=1e-9) for x in (test.low, test.high)]
    assert decision["promoted"] is test.passes and code == (0 if decision["promoted"] else 1)
    journal = Journal(with_shadow.state / "journal.db")
    assert journal.conn.execute("SELECT COUNT(*) FROM active_model").fetchone()[0] == int(decision["promoted"])

    # a promotion of the other model (the swap `trade promote` makes when the test passes): the next run trades
    # Toto 2.0 with those weights, and refuses a --model that disagrees
    swap(journal, "random:4m", compare(journal), "toto2")
    journal.close()
    after = full["SP500"].loc[days[-1]:].index[1]
    assert with_shadow.run(after, "--model", "kronos") == 2
    assert "this state folder's active model is toto2 random:4m" in capsys.readouterr().err
    assert with_shadow.run(after) == 0
    last = json.loads((with_shadow.state / "records.jsonl").read_text().splitlines()[-1])
    assert last["decision_ts"] == after.isoformat() and set(last["forecast_latency_s"]) == {"toto2"}
    # a new candidate of the promoted model needs no --shadow-model: the shadow is a toto2 beside the active toto2
    again = full["SP500"].loc[days[-1]:].index[2]
    assert with_shadow.run(again, "--shadow", "random:4m") == 0
    journal = Journal(with_shadow.state / "journal.db")
    assert journal.conn.execute("SELECT forecaster FROM shadow_decisions WHERE role = 'shadow' AND decision_ts = ?",
                                (again.isoformat(),)).fetchone()[0] == "toto2"
    journal.close()
