"""The shadow's skill and calibration (quantile CRPS and 80% coverage of both models' next-close forecasts on the
same settled bars), a candidate that fails never touching the live loop, and the journal's schema 2 -> 3 upgrade."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest
from jsonschema import Draft202012Validator
from scipy.stats import ttest_rel

from marketcast.backtest.orders import Decision
from marketcast.data import load_symbol
from marketcast.forecast.registry import MODEL_NAMES
from marketcast.trade.venues.paper import PaperBroker
from marketcast.trade.journal.state import SCHEMA_VERSION, Journal
from marketcast.trade.loop.cycle import LoopConfig, TradingLoop
from marketcast.trade.loop.feed import history_feed
from marketcast.trade.risk.gates import GateConfig
from marketcast.trade.loop.planner import CLOSE_LEVELS, Signal
from marketcast.trade.loop.shadow import Shadow, active_model, compare, skill
from marketcast.trade.ops.alerts import Alerts
from marketcast.trade.ops.status import status_data, status_rows
from marketcast.schemas import load as load_schema

SYMS = ("SP500", "NASDAQ")
OPEN_GATES = GateConfig(min_edge=-1.0, min_sharpe=-1e9, max_drawdown=1.01)


@pytest.fixture(scope="module")
def bars():
    return {s: load_symbol(s) for s in SYMS}


def normal_quantiles(scale: float) -> tuple[float, ...]:
    return tuple(scale * NormalDist().inv_cdf(p) for p in CLOSE_LEVELS)


class ForecastPlanner:
    """Long every bar at 1 % under the close (tests/trade/helpers.LongPlanner's decision) with a fixed forecast of
    the next close return, N(0, ``scale``) at the planner's levels; ``fail`` (cycle number -> 'raise' | 'nan')
    makes it fail on the bars of that cycle; ``seen`` records the broker's submit count at each call."""

    def __init__(self, scale: float, fail: dict[int, str] | None = None, broker=None) -> None:
        self.q, self.fail, self.broker, self.model = normal_quantiles(scale), fail or {}, broker, f"normal{scale}"
        self.bars: list[str] = []
        self.seen: list[int] = []

    def plan(self, bars, costs, learn_from=None) -> Signal:
        ts = bars.frame.index[-1].isoformat()
        if ts not in self.bars:
            self.bars.append(ts)
        if self.broker is not None:
            self.seen.append(len(self.broker.submit_log()))
        how = self.fail.get(len(self.bars))
        if how == "raise":
            raise RuntimeError("CUDA error: device-side assert triggered")
        close = float(bars.frame["close"].iloc[-1])
        q = tuple(float("nan") for _ in self.q) if how == "nan" else self.q
        return Signal(bars.symbol, ts, "long", Decision(1, round(close * 0.99, 2), round(close * 1.01, 2)), close,
                      {"edge": 0.01, "sharpe": 1.0, "max_drawdown": 0.0, "total_return": 0.01}, close_quantiles=q)


def run_days(path: Path, bars, days: int, shadow=None, failed: str | None = None):
    """``days`` cycles from 2017-03-01 on the paper broker, live = N(0, 1%) forecasts; ``shadow`` a planner
    factory (broker -> planner), ``failed`` a candidate that did not load."""
    broker = PaperBroker(path / "broker.db", bars, start="2017-03-01")
    journal = Journal(path / "journal.db")
    loop = TradingLoop(broker, journal, ForecastPlanner(0.01), history_feed(bars, lambda: broker.clock),
                       LoopConfig(SYMS, gates=OPEN_GATES))
    candidate = None
    if shadow is not None or failed is not None:
        candidate = None if shadow is None else shadow(broker)
        loop.shadow = Shadow(journal, candidate, "cand.pt", "base.pt", model="toto", live_model="toto",
                             alerts=Alerts(path), failed=failed)
    index = bars["SP500"].frame.loc["2017-03-01":].index[:days]
    counts = []
    for day in index:
        broker.advance_to(day)
        loop.run_cycle(broker.clock)
        counts.append(len(broker.submit_log()))
    return broker, journal, index, candidate, counts


def returns(bars, days) -> np.ndarray:
    """The settled next-bar close returns, by bar then symbol (the journal's pairing order)."""
    c = {s: bars[s].frame["close"].reindex(days).to_numpy() for s in SYMS}
    return np.stack([c[s][1:] / c[s][:-1] - 1 for s in SYMS], axis=1).ravel()


def energy_crps(q: np.ndarray, y: float) -> float:
    """CRPS of the equally weighted ensemble ``q`` in the energy form E|X - y| - E|X - X'| / 2 (Gneiting &
    Raftery 2007, eq. 21): an independent check of the quantile form at the midpoint levels."""
    return float(np.abs(q - y).mean() - 0.5 * np.abs(q[:, None] - q[None, :]).mean())


def validate_status(state: Path) -> dict:
    data = json.loads(json.dumps(status_data(state)))
    schema = load_schema("trade_status")
    Draft202012Validator(schema).validate(data)
    return data


def test_skill_and_calibration_of_both_models_on_the_same_settled_bars(tmp_path, bars):
    days = 9
    _, journal, index, _, _ = run_days(tmp_path, bars, days, shadow=lambda broker: ForecastPlanner(0.002))
    r = returns(bars, index)
    assert len(r) == 2 * (days - 1)
    live_q, cand_q = np.array(normal_quantiles(0.01)), np.array(normal_quantiles(0.002))
    live = np.array([energy_crps(live_q, y) for y in r])
    cand = np.array([energy_crps(cand_q, y) for y in r])
    k = skill(journal)
    assert k.n == len(r)
    assert k.live_crps == pytest.approx(live.mean(), rel=1e-12)
    assert k.shadow_crps == pytest.approx(cand.mean(), rel=1e-12)
    # 80%: the 0.1 and 0.9 quantiles are the 3rd and 23rd of the 25 midpoint levels
    assert CLOSE_LEVELS[2] == 0.1 and CLOSE_LEVELS[22] == 0.9
    assert k.live_coverage == pytest.approx(np.mean((live_q[2] <= r) & (r <= live_q[22])))
    assert k.shadow_coverage == pytest.approx(np.mean((cand_q[2] <= r) & (r <= cand_q[22])))
    assert 0 < k.shadow_coverage < k.live_coverage  # the narrow one misses more of the moves
    assert k.p == pytest.approx(ttest_rel(live, cand, alternative="greater").pvalue)
    # the journal holds a compact summary per decision: 25 quantiles and their levels, and the settled return
    row = journal.conn.execute("SELECT quantiles, ret FROM shadow_decisions WHERE role = 'shadow' "
                               "ORDER BY decision_ts, symbol").fetchone()
    stored = json.loads(row[0])
    assert stored["levels"] == pytest.approx(CLOSE_LEVELS) and stored["values"] == pytest.approx(cand_q)
    assert row[1] == pytest.approx(r[1])  # the first bar, NASDAQ before SP500
    journal.close()
    shown = validate_status(tmp_path)["shadow"]
    assert shown["scored"] == len(r) and shown["decisions"] == len(r) and shown["model"] == "toto"
    assert shown["shadow_crps"] == pytest.approx(k.shadow_crps) and shown["live_crps"] == pytest.approx(k.live_crps)
    assert shown["shadow_coverage_80"] == pytest.approx(k.shadow_coverage) and shown["errors"] is None
    text = dict(status_rows(tmp_path))["shadow skill and calibration"]
    assert text == (f"CRPS {k.shadow_crps:.6f} vs live {k.live_crps:.6f} (lower is better, p={k.p:.4g}); 80% "
                    f"interval coverage {k.shadow_coverage:.1%} vs live {k.live_coverage:.1%}; on {len(r)} settled bars")


@pytest.mark.parametrize("how", ["raise", "nan", "load"])
def test_a_failing_candidate_never_changes_or_delays_the_live_orders(tmp_path, bars, how):
    days = 6
    plain, plain_journal, index, _, plain_counts = run_days(tmp_path / "plain", bars, days)
    plain_journal.close()
    shadow = None if how == "load" else (lambda broker: ForecastPlanner(0.002, {3: how}, broker))
    failed = "could not load: ModelLoadError: cand.pt: no config.json" if how == "load" else None
    broker, journal, _, candidate, counts = run_days(tmp_path / "shadow", bars, days, shadow, failed)
    assert broker.submit_log() == plain.submit_log() and len(plain.submit_log()) > 0
    assert counts == plain_counts
    if candidate is not None:  # it plans after the cycle's orders went out: each call sees all of its bar's orders
        assert candidate.seen == [n for n in plain_counts for _ in SYMS]
    failing = index[2:3] if how != "load" else index
    errors = journal.conn.execute("SELECT decision_ts, symbol, error FROM shadow_errors ORDER BY decision_ts, "
                                  "symbol").fetchall()
    assert [(e[0], e[1]) for e in errors] == [(d.isoformat(), s) for d in failing for s in sorted(SYMS)]
    why = {"raise": "RuntimeError: CUDA error: device-side assert triggered",
           "nan": "the forecast is not finite (NaN or inf)", "load": failed}[how]
    assert {e[2] for e in errors} == {why}
    live = journal.conn.execute("SELECT COUNT(*) FROM shadow_decisions WHERE role = 'live'").fetchone()[0]
    cand = journal.conn.execute("SELECT COUNT(*) FROM shadow_decisions WHERE role = 'shadow'").fetchone()[0]
    assert live == 2 * days and cand == 2 * (days - len(failing))
    # paired only where both decided: the failed bars drop out of the comparison
    settled_pairs = 2 * (days - 1) - (2 if how != "load" else 2 * (days - 1))
    assert compare(journal).n == settled_pairs and skill(journal).n == settled_pairs
    journal.close()
    alerts = [json.loads(line) for line in (tmp_path / "shadow" / "alerts.jsonl").read_text().splitlines()]
    assert [a["kind"] for a in alerts] == ["shadow_error"] and why in alerts[0]["message"]
    shown = validate_status(tmp_path / "shadow")["shadow"]
    last = (failing[-1].isoformat(), SYMS[-1])  # the last one journalled: the cycle plans in SYMS order
    assert shown["errors"] == {"bars": len(errors), "last_bar": last[0], "symbol": last[1], "model": "cand.pt",
                               "error": why}
    assert dict(status_rows(tmp_path / "shadow"))["shadow errors"] == (
        f"{len(errors)} bar(s) failed, the live loop went on; last {last[1]} {last[0][:10]}: {why}")


V2_SHADOW = """
CREATE TABLE shadow_decisions (
    decision_ts TEXT NOT NULL, symbol TEXT NOT NULL, role TEXT NOT NULL, model TEXT NOT NULL,
    side INTEGER NOT NULL, close REAL NOT NULL, pnl REAL, settled_ts TEXT,
    PRIMARY KEY (decision_ts, symbol, role));
CREATE TABLE active_model (
    slot INTEGER PRIMARY KEY CHECK (slot = 1), weights TEXT NOT NULL, since TEXT NOT NULL);
"""


def test_a_version_2_journal_is_upgraded_with_its_rows_kept(tmp_path):
    path = tmp_path / "journal.db"
    Journal(path).close()
    conn = sqlite3.connect(path)  # as schema 2 left it: no quantiles, ret, forecaster, model; no shadow_errors
    conn.executescript("DROP TABLE shadow_decisions; DROP TABLE active_model; DROP TABLE shadow_errors;" + V2_SHADOW)
    for role, pnl in (("live", 0.01), ("shadow", 0.03)):
        conn.execute("INSERT INTO shadow_decisions VALUES ('2024-01-02T00:00:00+00:00', 'SP500', ?, ?, 1, 100.0, ?, "
                     "'2024-01-03T00:00:00+00:00')", (role, "b.pt" if role == "shadow" else "a.pt", pnl))
    conn.execute("INSERT INTO active_model VALUES (1, 'a.pt', 'then')")
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()
    shown = validate_status(tmp_path)["shadow"]  # a read-only open upgrades it, as opening it for writing does
    assert shown["decisions"] == 1 and shown["active"] == "a.pt" and shown["model"] is None
    assert shown["scored"] == 0 and shown["shadow_crps"] is None and shown["errors"] is None
    journal = Journal(path)
    assert journal.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
    assert active_model(journal) == (None, "a.pt")  # a version-2 promotion: the model trade run is given
    r = compare(journal)
    assert r.n == 1 and r.shadow_pnl == pytest.approx(0.03) and r.live_pnl == pytest.approx(0.01)
    columns = {row[1] for row in journal.conn.execute("PRAGMA table_info(shadow_decisions)").fetchall()}
    assert {"quantiles", "ret", "forecaster"} <= columns
    assert skill(journal).n == 0  # nothing journalled to score it with
    journal.close()


@pytest.mark.parametrize("flags, line", [
    (["--shadow-model", "toto2"], "--shadow-model toto2 needs --shadow WEIGHTS (e.g. --shadow random:4m or a folder "
                                  "of fine-tuned weights)"),
    (["--shadow-model", "prophet", "--shadow", "x"], f"--shadow-model 'prophet': choose one of "
                                                     f"{', '.join(MODEL_NAMES)}"),
    (["--shadow-model", "baseline", "--shadow", "x", "--model", "toto"],
     "--shadow x: the baseline model has no weights to compare; pass --model toto or kronos with --shadow, or a "
     "--shadow-model"),
])
def test_bad_shadow_flags_are_one_line_and_exit_2_before_any_state(tmp_path, monkeypatch, capsys, flags, line):
    from marketcast.commands import main

    monkeypatch.chdir(tmp_path)
    assert main(["trade", "run", "--once", "--state-dir", str(tmp_path / "state"), *flags]) == 2
    assert capsys.readouterr().err.strip() == f"error: {line}"
    assert not (tmp_path / "state" / "journal.db").exists()


def test_a_candidate_that_does_not_load_leaves_trade_run_trading(tmp_path, monkeypatch, capsys):
    """Through `trade run`: the live baseline's cycle runs and orders; the candidate's load error is printed,
    journalled for each symbol of the bar, alerted once and shown by `trade status`."""
    from marketcast.commands import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ADD_LATEST", raising=False)
    data = tmp_path / "data"
    data.mkdir()
    for s in SYMS:
        load_symbol(s).frame.loc[:"2018-07-20"].to_csv(data / f"{s}.csv")
    (tmp_path / "clock").write_text("2018-07-20T21:30:00Z")
    state = tmp_path / "state"
    missing = str(tmp_path / "no-such-weights")
    code = main(["trade", "run", "--once", "--symbols", ",".join(SYMS), "--data-dir", str(data), "--state-dir",
                 str(state), "--clock-file", str(tmp_path / "clock"), "--shadow-model", "toto", "--shadow", missing])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0 and f"shadow toto {missing} could not load: " in out and "the live loop runs without it" in out
    journal = Journal(state / "journal.db", read_only=True)
    errors = journal.conn.execute("SELECT symbol, error FROM shadow_errors").fetchall()
    assert journal.conn.execute("SELECT COUNT(*) FROM cycles WHERE status = 'done'").fetchone()[0] == 1
    assert journal.conn.execute("SELECT COUNT(*) FROM intents WHERE status = 'submitted'").fetchone()[0] >= 1
    journal.close()
    assert sorted(e[0] for e in errors) == sorted(SYMS) and all(e[1].startswith("could not load: ") for e in errors)
    alerts = [json.loads(line) for line in (state / "alerts.jsonl").read_text().splitlines()]
    assert [a["kind"] for a in alerts] == ["shadow_error"]
    assert validate_status(state)["shadow"]["errors"]["bars"] == len(SYMS)


def test_promote_on_crps_decides_on_the_forecasts_where_pnl_cannot_tell_them_apart(tmp_path, bars):
    """Both models take the same trades (equal P&L: the P&L test refuses), but the shadow's next-close forecast
    fits the calm 2017 market better than the live model's 1% spread: --metric crps promotes it, on the sequential
    test of the daily CRPS differences."""
    from marketcast.trade.loop.shadow import promote, verdict

    _, journal, index, _, _ = run_days(tmp_path, bars, 70, shadow=lambda broker: ForecastPlanner(0.004))
    r = returns(bars, index)
    live = np.array([energy_crps(np.array(normal_quantiles(0.01)), y) for y in r])
    cand = np.array([energy_crps(np.array(normal_quantiles(0.004)), y) for y in r])
    by_pnl, by_crps = verdict(journal, "pnl"), verdict(journal, "crps")
    assert by_pnl.n == by_crps.n == len(r) and by_pnl.mean_diff == 0.0 and by_pnl.p == 1.0
    days = len(r) // len(SYMS)  # one observation a day: the symbols' CRPS differences of that day summed
    assert by_crps.test.n == days and by_crps.mean_diff == pytest.approx((live - cand).sum() / days, rel=1e-12)
    assert by_crps.mean_diff > 0 and by_crps.test.passes and by_crps.p == pytest.approx(1 / by_crps.test.e_value)
    refused, line, _ = promote(journal, min_decisions=len(r), metric="pnl")
    assert not refused and line.startswith("not promoted: the test has not bet yet") and active_model(journal) is None
    promoted, line, _ = promote(journal, min_decisions=len(r), metric="crps")
    assert promoted and line.startswith(f"promoted cand.pt: n={len(r)} paired decisions on daily CRPS")
    assert active_model(journal) == ("toto", "cand.pt")
    journal.close()
