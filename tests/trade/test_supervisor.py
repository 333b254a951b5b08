"""The loop that keeps running: a real ``trade run`` process on a CSV that grows a bar at a time trades each new
bar, stops trading (without exiting) when the file stops growing, and ends cleanly on SIGTERM; transient
errors back off and retry; the exit codes a supervisor needs to tell apart."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from marketcast.data import load_symbol
from marketcast.errors import AuthError, ExitCode, HaltedError
from marketcast.trade.journal.state import Journal
from marketcast.trade.launch import AlpacaVenue, PaperVenue, file_clock, setup_logging
from marketcast.trade.loop.cycle import LoopConfig, TradingLoop
from marketcast.trade.loop.planner import BacktestPlanner
from marketcast.trade.loop.supervisor import Supervisor
from marketcast.trade.ops.alerts import Alerts, AlertThresholds
from marketcast.trade.ops.monitor import Monitor
from marketcast.trade.risk.gates import GateConfig
from marketcast.trade.test_kit.alpaca_env import KEY, SECRET, embedded_fake
from marketcast.fake_alpaca.market import bars_of
from tests.trade.helpers import trade_main

SRC = str(Path(__file__).resolve().parents[2] / "src")
FRAMES = {s: load_symbol(s).frame for s in ("SP500", "NASDAQ")}
DAYS = list(FRAMES["SP500"].loc["2018-07-13":"2018-07-24"].index)  # a Friday, then 7 sessions
OPEN = ["--min-edge", "-1", "--min-sharpe", "-1e9", "--max-drawdown", "1.01"]  # every non-flat decision trades
DEADLINE_S = 120  # generous: a loaded 2-core machine; each wait ends as soon as its condition holds


def publish(data: Path, clock: Path, upto: pd.Timestamp, now: pd.Timestamp | None = None) -> None:
    """What a data job does after the close: each file replaced whole (written aside, renamed), then the clock."""
    for symbol, frame in FRAMES.items():
        tmp = data / f".{symbol}.csv.tmp"
        frame.loc[:upto].to_csv(tmp)
        os.replace(tmp, data / f"{symbol}.csv")
    clock.write_text((now or upto + pd.Timedelta(hours=21, minutes=30)).isoformat())


def journal(state: Path, sql: str) -> list[tuple]:
    try:
        with sqlite3.connect(f"file:{state / 'journal.db'}?mode=ro", uri=True, timeout=10) as c:
            return c.execute(sql).fetchall()
    except sqlite3.OperationalError:  # not created yet
        return []


def cycles(state: Path, status: str = "done") -> list[str]:
    return [r[0] for r in journal(state, f"SELECT decision_ts FROM cycles WHERE status='{status}' ORDER BY 1")]


def until(condition, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert proc.poll() is None, f"the loop exited ({proc.returncode}) while waiting for {what}"
        assert time.monotonic() < deadline, f"no {what} within {DEADLINE_S} s"
        time.sleep(0.02)


def start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, Path, Path, Path]:
    data, state, clock = tmp_path / "data", tmp_path / "state", tmp_path / "clock"
    data.mkdir(exist_ok=True)
    env = {**{k: v for k, v in os.environ.items() if k != "ADD_LATEST"}, "PYTHONPATH": SRC, "COLUMNS": "200"}
    proc = subprocess.Popen([sys.executable, "-m", "marketcast.commands", "trade", "run", "--data-dir", str(data), "--state-dir",
                             str(state), "--clock-file", str(clock), *args], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return proc, data, state, clock


def test_a_paper_loop_trades_each_new_bar_then_stops_trading_when_the_file_stops_growing(tmp_path):
    data, clock = tmp_path / "data", tmp_path / "clock"
    data.mkdir()
    publish(data, clock, DAYS[0])
    proc, _, state, _ = start(tmp_path, "--interval", "0.2", *OPEN)
    try:
        for n, day in enumerate(DAYS, start=1):
            if n > 1:
                publish(data, clock, day)
            until(lambda: len(cycles(state)) == n, proc, f"the cycle of {day:%Y-%m-%d}")
        traded = journal(state, "SELECT decision_ts, client_order_id FROM intents WHERE status='submitted'")
        intents = journal(state, "SELECT * FROM intents ORDER BY client_order_id")
        assert cycles(state) == [d.isoformat() for d in DAYS]  # one cycle per bar, in order, none twice
        assert {ts for ts, _ in traded} == {d.isoformat() for d in DAYS}  # and every bar traded
        # the file stops growing; the clock goes on to Friday evening: three sessions are missing
        clock.write_text("2018-07-27T21:30:00+00:00")
        alerts = state / "alerts.jsonl"
        until(lambda: alerts.exists() and sum('"stale_data"' in x for x in alerts.read_text().splitlines()) == 2,
              proc, "the stale-data alerts")
        time.sleep(1.0)  # five more looks at 0.2 s: the loop keeps running and trades nothing
        assert proc.poll() is None and len(cycles(state)) == len(DAYS)
        assert journal(state, "SELECT * FROM intents ORDER BY client_order_id") == intents  # nothing new
        stale = [json.loads(x) for x in alerts.read_text().splitlines() if '"stale_data"' in x]
        assert sorted(a["subject"] for a in stale) == ["NASDAQ", "SP500"]
        assert stale[0]["message"].endswith("the XNYS calendar says the bar of 2018-07-27 00:00 was complete by "
                                            "2018-07-27 20:30 UTC (stale_after_s 3600)")  # now less an hour
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "SIGTERM: stopping after the step in progress" in err and "Traceback" not in err
    log = (state / "trade.log").read_text()
    fills = journal(state, "SELECT client_order_id FROM fills")
    assert fills and all(f"fill {cid}:" in log for (cid,) in fills)  # trade.log: every fill with its client id
    assert all(f"{cid}: submitted" in log for _, cid in traded)  # ... and every submit
    assert sum('"stale_data"' in x for x in (state / "alerts.jsonl").read_text().splitlines()) == 2  # once each


def test_sigterm_during_a_cycle_finishes_the_cycle_then_exits_0(tmp_path):
    data, clock = tmp_path / "data", tmp_path / "clock"
    data.mkdir()
    publish(data, clock, DAYS[0])
    proc, _, state, _ = start(tmp_path, "--interval", "60", *OPEN)
    try:
        until(lambda: cycles(state, "started") or cycles(state), proc, "the first cycle to start")
        mid_cycle = bool(cycles(state, "started"))  # read just before the signal: the step is under way
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert mid_cycle, "the signal was meant to land inside the first cycle (its start-up backtest takes seconds)"
    assert proc.returncode == 0, err
    assert cycles(state) == [DAYS[0].isoformat()] and cycles(state, "started") == []  # finished, then stopped
    records = [json.loads(x) for x in (state / "records.jsonl").read_text().splitlines()]
    assert [r["decision_ts"] for r in records] == [DAYS[0].isoformat()] and records[0]["warmup"]["model"] == "baseline"
    assert all(s == "submitted" for (s,) in journal(state, "SELECT status FROM intents"))
    from marketcast.trade.journal.lock import StateLock

    StateLock(state).acquire().release()  # the lock went with the process


def paper_supervisor(tmp_path: Path, wait, alerts: Alerts | None = None) -> tuple[Supervisor, Path, Path]:
    data, clock, state = tmp_path / "data", tmp_path / "clock", tmp_path / "state"
    data.mkdir()
    publish(data, clock, DAYS[1])
    venue = PaperVenue(("SP500", "NASDAQ"), state, data, None, file_clock(clock))
    loop = TradingLoop(venue.broker, Journal(state / "journal.db"), BacktestPlanner(_baseline()), venue.feed,
                       LoopConfig(("SP500", "NASDAQ"), gates=GateConfig(min_edge=-1.0, min_sharpe=-1e9)),
                       Monitor(state), venue.asset_classes)
    return Supervisor(loop, venue, alerts or Alerts(state), AlertThresholds(), interval_s=1.0, wait=wait), data, clock


def _baseline():
    from marketcast.forecast import load_forecaster

    return load_forecaster("baseline")


def test_data_that_moves_backwards_is_a_warning_and_an_alert_and_is_not_traded(tmp_path, caplog):
    looks = []

    def wait(seconds: float) -> bool:
        looks.append(seconds)
        if len(looks) == 1:  # the data job rewrote the files with an older history
            publish(tmp_path / "data", tmp_path / "clock", DAYS[0], now=pd.Timestamp("2018-07-16T21:30Z"))
        return len(looks) == 3

    sup, _, _ = paper_supervisor(tmp_path, wait)
    assert sup.run() == ExitCode.OK and looks == [1.0, 1.0, 1.0]
    assert sup.loop.journal.last_done_cycle() == DAYS[1].isoformat()  # one cycle, on the newer bar only
    back = [json.loads(x) for x in (tmp_path / "state" / "alerts.jsonl").read_text().splitlines()
            if '"data_backwards"' in x]
    assert [a["message"] for a in back] == ["data moved backwards: the last bar is 2018-07-13 00:00, the loop "
                                            "already saw 2018-07-16 00:00"]  # once, though seen twice
    assert sum("nothing is traded until the data is past it again" in m for m in caplog.messages) == 2


def test_transient_errors_back_off_and_retry_without_ending_the_loop(tmp_path, monkeypatch):
    with embedded_fake("2018-07-20") as fake:
        monkeypatch.setenv("APCA_API_KEY_ID", KEY)
        monkeypatch.setenv("APCA_API_SECRET_KEY", SECRET)
        monkeypatch.setenv("APCA_API_BASE_URL", fake.url)
        monkeypatch.setenv("APCA_API_DATA_URL", fake.url)
        venue = AlpacaVenue(("SP500", "NASDAQ"), live=False)
        venue.broker.max_retries = 0  # each failed request is one failed look
        state = tmp_path / "state"
        loop = TradingLoop(venue.broker, Journal(state / "journal.db"), BacktestPlanner(_baseline()), venue.feed,
                           LoopConfig(("SP500", "NASDAQ")), Monitor(state), venue.asset_classes)
        waits: list[float] = []

        def wait(seconds: float) -> bool:
            waits.append(seconds)
            if len(waits) == 1:  # after the first good look the broker goes away for three looks
                fake.fail("GET", "/v2/clock", status=503, body={"code": 50010000, "message": "busy"}, times=3)
            return len(waits) == 5

        sup = Supervisor(loop, venue, Alerts(state), AlertThresholds(), interval_s=30.0, wait=wait)
        assert sup.run() == ExitCode.OK
        assert waits == [30.0, 1.0, 2.0, 4.0, 30.0]  # backoff 1, 2, 4 s, then the schedule again
        unavailable = [json.loads(x) for x in (state / "alerts.jsonl").read_text().splitlines()
                       if '"unavailable"' in x]
        assert len(unavailable) == 1 and "HTTP 503" in unavailable[0]["message"]
        assert loop.journal.last_done_cycle() == "2018-07-20T00:00:00+00:00"

        fake.fail("GET", "/v2/clock", status=401, body={"code": 40110000, "message": "request is not authorized"})
        refused = Supervisor(loop, venue, Alerts(state), AlertThresholds(), interval_s=30.0, wait=lambda s: False)
        with pytest.raises(AuthError):  # keys refused: never retried, exit 4
            refused.run()
        loop.journal.halts.add("risk", "risk limit: a test", "marketcast trade resume --state-dir x")
        with pytest.raises(HaltedError):  # halted: exit 5, and an alert says so
            Supervisor(loop, venue, Alerts(state), AlertThresholds(), wait=lambda s: False).run()
        assert json.loads((state / "alerts.jsonl").read_text().splitlines()[-1])["kind"] == "halt"


@pytest.mark.parametrize("how, code, says", [
    ("503", ExitCode.UNAVAILABLE, "error: clock: HTTP 503 after 3 retries"),  # the adapter's own, 1.4 s
    ("keys", ExitCode.AUTH, "error: clock: Alpaca refused the keys (HTTP 401)"),
    ("config", ExitCode.USAGE, "error: risk.max_daily_loss = '2' (trade.risk.max_daily_loss in marketcast.toml) "
                               "is more than 1"),
])
def test_once_ends_with_an_exit_code_a_supervisor_can_tell_apart(tmp_path, monkeypatch, capsys, how, code, says):
    with embedded_fake("2018-07-20") as fake:
        monkeypatch.chdir(tmp_path)
        for k, v in {"APCA_API_KEY_ID": KEY, "APCA_API_SECRET_KEY": "wrong" if how == "keys" else SECRET,
                     "APCA_API_BASE_URL": fake.url, "APCA_API_DATA_URL": fake.url}.items():
            monkeypatch.setenv(k, v)
        if how == "503":
            fake.fail("GET", "/v2/clock", status=503, body={"code": 50010000, "message": "busy"}, times=10)
        if how == "config":
            Path("marketcast.toml").write_text("[trade.risk]\nmax_daily_loss = 2.0\n")
        try:
            assert trade_main(["run", "--broker", "alpaca", "--once", "--state-dir", str(tmp_path / "s")]) == code
        finally:
            setup_logging(None, verbose=False)  # detach trade.log
        lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
        assert len(lines) == 1 and lines[0].startswith(says), lines
        assert [m for m, _, _ in fake.requests if m in ("POST", "DELETE")] == []


def test_alpaca_bars_are_requested_again_only_when_a_newer_bar_is_complete(monkeypatch):
    """Looks at the same clock reuse the bars held; the next session's close makes its bar due and it is fetched
    (a minute's look costs one clock request, not one bars request per symbol)."""
    with embedded_fake("2018-07-20") as fake:
        for k, v in {"APCA_API_KEY_ID": KEY, "APCA_API_SECRET_KEY": SECRET, "APCA_API_BASE_URL": fake.url,
                     "APCA_API_DATA_URL": fake.url}.items():
            monkeypatch.setenv(k, v)
        venue = AlpacaVenue(("SP500", "NASDAQ"), live=False)
        bar_requests = lambda: sum(p == "/v2/stocks/bars" for _, p, _ in fake.requests)  # noqa: E731
        assert venue.refresh(venue.now()) == "2018-07-20T00:00:00+00:00"
        first = bar_requests()
        assert first >= 2  # both symbols (pages included)
        fake.exchange.clock = "2018-07-23T15:00:00Z"  # Monday, the session still trading: no new bar is due
        assert venue.refresh(venue.now()) == "2018-07-20T00:00:00+00:00" and bar_requests() == first
        nxt = {s: bars_of(FRAMES[s].loc[:"2018-07-23"]) for s in ("SP500", "NASDAQ")}
        fake.bars.update(nxt)
        fake.exchange.clock = "2018-07-23T21:00:00Z"  # after Monday's close: its bar is due and fetched
        assert venue.refresh(venue.now()) == "2018-07-23T00:00:00+00:00" and bar_requests() > first
