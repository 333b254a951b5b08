"""``marketcast trade`` against the fake Alpaca, as a user runs it: the host follows the flags, keys are never
printed, a lost journal refuses to trade until ``trade reconcile --accept-broker``, status shows it all."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from marketcast.trade.test_kit.alpaca_env import KEY, SECRET, SRC, embedded_fake

TRADE = [sys.executable, "-m", "marketcast.commands", "trade"]


def env_for(fake, **extra) -> dict:
    return {**os.environ, "PYTHONPATH": SRC, "APCA_API_KEY_ID": KEY, "APCA_API_SECRET_KEY": SECRET,
            "APCA_API_BASE_URL": fake.url, "APCA_API_DATA_URL": fake.url, "COLUMNS": "250",
            "MARKETCAST_TRADE_EXIT": "close", **extra}  # the bars these tests picked pass the gates under close


def trade(args, env, timeout=90) -> subprocess.CompletedProcess:
    return subprocess.run([*TRADE, *args], capture_output=True, text=True, env=env, timeout=timeout)


@pytest.mark.parametrize("url, flags, says", [
    ("https://api.alpaca.markets", [], "is Alpaca's LIVE host but this run is paper (the default)"),
    ("https://api.alpaca.markets/v2/", ["--paper"], "is Alpaca's LIVE host but this run is paper"),
    ("https://paper-api.alpaca.markets", ["--live", "--i-understand-live-trading"], "is Alpaca's PAPER host but --live"),
    ("https://alpaca.example.com", [], "is not an Alpaca host"),
])
def test_a_base_url_of_the_other_mode_is_one_error_before_any_request_or_file(fake, tmp_path, url, flags, says):
    state = tmp_path / "state"
    out = trade(["run", "--broker", "alpaca", "--symbols", "AAPL", "--state-dir", str(state), "--once", *flags],
                env_for(fake, APCA_API_BASE_URL=url))
    assert out.returncode == 2 and out.stdout == "", out.stderr
    assert out.stderr.strip().splitlines() == [next(line for line in out.stderr.splitlines() if says in line)]
    assert fake.requests == [] and not state.exists()  # nothing sent, nothing written


def test_cli_live_needs_confirmation_and_never_prints_keys(fake, tmp_path):
    env = env_for(fake)
    base = ["run", "--symbols", "AAPL", "--state-dir", str(tmp_path), "--once", "--dry-run"]
    refused = trade([*base, "--live"], env)
    assert refused.returncode == 2 and "--i-understand-live-trading" in refused.stderr
    assert fake.requests == []
    ok = trade([*base, "--live", "--i-understand-live-trading", "--add-latest", "-v"], env)
    assert ok.returncode == 0, ok.stderr
    assert "dry run, nothing sent" in ok.stdout.replace("\n", " ")
    assert f"APCA_API_BASE_URL={fake.url} is a local test server, not Alpaca: live orders go there" in ok.stderr
    assert [m for m, _, _ in fake.requests].count("POST") == 0 and "DELETE" not in [m for m, _, _ in fake.requests]
    assert list(tmp_path.iterdir()) == []  # a dry run writes nothing, not even its log
    for text in (ok.stdout, ok.stderr):
        assert KEY not in text and SECRET not in text
    missing = trade([*base, "--broker", "alpaca"], {k: v for k, v in env.items() if not k.startswith("APCA_API_")})
    assert missing.returncode == 2 and "APCA_API_KEY_ID" in missing.stderr


def test_a_deleted_journal_refuses_to_trade_until_accept_broker_then_trades_again(tmp_path, capsys):
    with embedded_fake("2018-07-20") as fake:  # a bar whose signals pass the default gates
        deleted_journal_then_accept_broker(fake, tmp_path, capsys)


def deleted_journal_then_accept_broker(fake, tmp_path, capsys):
    env, state = env_for(fake), tmp_path / "state"
    run = ["run", "--broker", "alpaca", "--symbols", "SP500,NASDAQ", "--state-dir", str(state), "--once"]
    first = trade(run, env)
    assert first.returncode == 0, first.stderr
    placed = sorted(o["client_order_id"] for o in fake.orders)
    assert placed and all(cid.startswith("mc-") for cid in placed)
    for name in ("journal.db", "journal.db-wal", "journal.db-shm"):
        (state / name).unlink(missing_ok=True)
    posts = len([m for m, _, _ in fake.requests if m in ("POST", "DELETE")])
    halted = trade(run, env)
    assert halted.returncode == 5, halted.stderr
    [line] = [x for x in halted.stderr.splitlines() if "local test server" not in x]  # one line, and the warning
    assert "trading is halted since" in line and f"does not know ({', '.join(placed)})" in line
    assert (f"marketcast trade reconcile --accept-broker --state-dir {state} --symbols SP500,NASDAQ --broker alpaca"
            in line)
    assert len([m for m, _, _ in fake.requests if m in ("POST", "DELETE")]) == posts  # nothing touched
    from marketcast.trade.journal.state import Journal
    from tests.trade.helpers import trade_main

    [halt] = Journal(state / "journal.db").halts.active()  # kept: every restart refuses until it is lifted
    assert halt.message() in line and halt.source == "reconcile"
    assert trade_main(["status", "--state-dir", str(state)]) == 0  # (in this process: the same command, cheaper)
    shown = " ".join(capsys.readouterr().out.split())
    assert f"halted │ {halt.message()[:60]}" in shown
    accept = trade(["reconcile", "--accept-broker", "--broker", "alpaca", "--symbols", "SP500,NASDAQ", "--state-dir",
                    str(state)], env)
    assert accept.returncode == 0, accept.stderr
    assert accept.stdout.count("adopted from the broker") == len(placed) and "reconcile halt lifted" in accept.stdout
    check = trade(["reconcile", "--broker", "alpaca", "--symbols", "SP500,NASDAQ", "--state-dir", str(state)], env)
    assert check.returncode == 0 and "journal and broker agree" in check.stdout
    again = trade(run, env)
    assert again.returncode == 0, again.stderr
    status = trade(["status", "--state-dir", str(state)], env)
    text = " ".join(status.stdout.split())
    assert f"endpoint │ {fake.url} (paper, local test server)" in text and "halted │ no" in text
    assert f"bound to │ account {fake.exchange.account_id} at {fake.url}" in text


def test_a_second_loop_on_one_state_folder_exits_2_naming_the_holder(fake, tmp_path):
    from marketcast.trade.journal.lock import StateLock

    with StateLock(tmp_path):  # this test process is the running loop
        second = trade(["run", "--broker", "alpaca", "--symbols", "AAPL", "--state-dir", str(tmp_path), "--once"],
                       env_for(fake))
    assert second.returncode == 2 and second.stdout == ""
    assert second.stderr.strip() == (f"error: another marketcast loop (PID {os.getpid()}) is using {tmp_path}; stop it "
                                     f"first, or give this one another --state-dir")
    assert fake.requests == []
    with StateLock(tmp_path):  # released on exit, and the refused loop never took it
        pass


@pytest.mark.parametrize("symbols, says", [
    ("SP500,NOSUCH", "NOSUCH: Alpaca does not list this symbol (GET /v2/assets/NOSUCH: 404)"),
    ("SP500,EURUSD", "trade.symbols: EURUSD (forex): the loop trades stock and crypto only"),
])
def test_a_symbol_the_broker_does_not_list_or_a_market_the_loop_cannot_trade_is_one_line_before_any_order(
        tmp_path, symbols, says):
    with embedded_fake("2018-07-20") as fake:
        out = trade(["run", "--broker", "alpaca", "--symbols", symbols, "--state-dir", str(tmp_path), "--once"],
                    env_for(fake))
        sent = [m for m, _, _ in fake.requests if m in ("POST", "DELETE")]
    lines = [x for x in out.stderr.splitlines() if "local test server" not in x]
    assert out.returncode == 2 and len(lines) == 1 and says in lines[0], out.stderr
    assert sent == []
