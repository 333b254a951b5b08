"""No secret a URL can carry (a webhook's path token, userinfo, a query key) nor an API key reaches the text a
trade command writes: stdout, stderr, trade.log, records.jsonl, alerts.jsonl, ``trade status`` and its page,
``--print-config``. Checked on real runs, in the bytes of every file of the state folder."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from marketcast.data import load_symbol
from marketcast.trade.ops.redact import redact, redact_url
from marketcast.trade.test_kit.alpaca_env import KEY, SECRET, SRC, embedded_fake

from .test_alerts import Webhook

SLACK = "https://hooks.slack.com/services/T000/B000/XXXXXXXX"  # a Slack incoming webhook: its path is its secret
PAPER_ENV = {**{k: v for k, v in os.environ.items() if not k.startswith(("APCA_API_", "MARKETCAST_", "ADD_LATEST"))},
             "PYTHONPATH": SRC, "COLUMNS": "400"}


def trade(args: list[str], env: dict = PAPER_ENV) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "marketcast.commands", "trade", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def alpaca_env(fake, **extra) -> dict:
    return {**PAPER_ENV, "APCA_API_KEY_ID": KEY, "APCA_API_SECRET_KEY": SECRET, "APCA_API_BASE_URL": fake.url,
            "APCA_API_DATA_URL": fake.url, **extra}


def dead_port() -> int:
    """A port nobody listens on: the webhook POST fails at once, and the loop logs that it failed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def leaks(secret: str, texts: list[str], state: Path) -> list[str]:
    """Where ``secret`` shows: the indexes of ``texts`` and the files of ``state`` (bytes: databases too)."""
    return ([f"text {i}" for i, t in enumerate(texts) if secret in t]
            + [p.name for p in sorted(state.iterdir()) if p.is_file() and secret.encode() in p.read_bytes()])


@pytest.mark.parametrize("url, shown", [
    (SLACK, "https://hooks.slack.com/***"),
    ("https://hooks.example.com/marketcast/4f1c9a7e2b", "https://hooks.example.com/***"),
    ("https://discord.com/api/webhooks/1234567/AbCdEf-token", "https://discord.com/***"),
    ("https://example.com/4f1c9a7e2b", "https://example.com/***"),  # a token as the first segment
    ("https://ntfy.sh/quietotterbridge", "https://ntfy.sh/***"),  # a one-word segment: ntfy's topic is its secret
    ("https://user:pass@ntfy.example.com/", "https://***@ntfy.example.com/"),
    ("https://example.com/hook?token=abc&x=1", "https://example.com/***?token=***&x=***"),
    ("http://127.0.0.1:5000/v2/orders?status=all#frag", "http://127.0.0.1:5000/***?status=***#***"),
])
def test_each_secret_form_of_a_url_is_redacted_once_and_for_all(url, shown):
    assert redact_url(url) == shown and redact(f"POST to {url}, failed.") == f"POST to {shown}, failed."
    assert redact(shown) == shown  # a log record may pass two handlers' filters


def test_a_url_without_secrets_stays_readable():
    for url in ("https://paper-api.alpaca.markets", "http://127.0.0.1:8080", "https://example.com/"):
        assert redact(f"at {url} (paper)") == f"at {url} (paper)"
    assert redact("file:///home/me/out/trade/status.html") == "file:///home/me/out/trade/status.html"


def test_a_webhook_with_userinfo_posts_basic_auth_to_the_bare_url():
    """Userinfo goes as an Authorization header (RFC 7617), never into a DNS lookup of ``user:pass@host``."""
    from marketcast.trade.ops.alerts import Alerts

    hook = Webhook()
    try:
        url = hook.url.replace("http://", "http://alerter:Pw%2F9d8c@")
        Alerts(None, url).emit("halt", "loop", "halted")
        [(path, _, body)] = hook.received
        assert path == "/alerts" and body["message"] == "halted"
        assert hook.auth == ["Basic YWxlcnRlcjpQdy85ZDhj"]  # base64 of alerter:Pw/9d8c
    finally:
        hook.close()


@pytest.fixture(scope="module")
def paper_data(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("bars")
    for sym in ("SP500", "NASDAQ"):  # history up to a bar whose signals pass the default gates
        load_symbol(sym).frame.loc[:"2018-07-20"].to_csv(folder / f"{sym}.csv")
    clock = folder / "clock"
    clock.write_text("2018-07-20T21:30:00Z")
    return folder, clock


@pytest.mark.parametrize("form, path, secret, shown", [
    ("path token", "/marketcast/4f1c9a7e2b6d0c3a", "4f1c9a7e2b6d0c3a", "/***"),
    ("query key", "/alerts?token=q7Zk2Lx9Wm&channel=trading-ops", "q7Zk2Lx9Wm", "/***"),  # the webhook: its host
])
def test_a_webhooks_secret_stays_out_of_the_log_stderr_alerts_and_status(paper_data, tmp_path, form, path, secret,
                                                                         shown):
    data, clock = paper_data
    port, state = dead_port(), tmp_path / "state"
    url = f"http://127.0.0.1:{port}{path}"
    common = ["--data-dir", str(data), "--state-dir", str(state), "--clock-file", str(clock), "--webhook", url]
    run = trade(["run", "--symbols", "SP500,NASDAQ", "--once", "--alert-latency", "0", *common], PAPER_ENV)
    assert run.returncode == 0, run.stderr
    failed = f"alert webhook http://127.0.0.1:{port}{shown} failed: "
    assert failed in run.stderr and failed in (state / "trade.log").read_text()  # the line that carried it
    assert json.loads((state / "alerts.jsonl").read_text().splitlines()[0])["kind"] == "latency"
    config = trade(["run", "--print-config", *common], PAPER_ENV)
    assert config.returncode == 0 and f"http://127.0.0.1:{port}{shown}" in config.stdout, config.stderr
    status = trade(["status", "--state-dir", str(state), "--html"], PAPER_ENV)
    assert status.returncode == 0, status.stderr
    texts = [run.stdout, run.stderr, config.stdout, config.stderr, status.stdout, status.stderr]
    assert leaks(secret, texts, state) == []


def test_a_slack_webhook_in_print_config_shows_its_host_only(tmp_path):
    (tmp_path / "marketcast.toml").write_text(f'[trade.alerts]\nwebhook = "{SLACK}"\n')
    out = trade(["run", "--print-config", "--config", str(tmp_path / "marketcast.toml")],
                {**PAPER_ENV, "MARKETCAST_TRADE_ALERTS_WEBHOOK": SLACK + "2"})
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "alerts.webhook │ https://hooks.slack.com/*** │ environment" in text
    assert "overrides" in text and "= https://hooks.slack.com/***" in text  # the file's, shadowed
    assert "XXXXXXXX" not in out.stdout + out.stderr


def test_userinfo_in_the_broker_and_webhook_urls_stays_out_of_records_logs_and_status(tmp_path):
    state, port = tmp_path / "state", dead_port()
    with embedded_fake("2018-07-20") as fake:
        base = fake.url.replace("http://", "http://trader:Bk-7c6b5a49@")
        env = alpaca_env(fake, APCA_API_BASE_URL=base)
        run = trade(["run", "--broker", "alpaca", "--symbols", "SP500,NASDAQ", "--state-dir", str(state), "--once",
                     "--alert-latency", "0", "--webhook", f"http://hook:Hk-5e4d3c2b@127.0.0.1:{port}/alerts"], env)
        assert run.returncode == 0, run.stderr
        status = trade(["status", "--state-dir", str(state), "--html"], env)
    assert status.returncode == 0, status.stderr
    endpoint = f"{fake.url.replace('http://', 'http://***@')} (paper, local test server)"
    record = json.loads((state / "records.jsonl").read_text().splitlines()[-1])
    assert record["endpoint"] == endpoint
    warning = f"APCA_API_BASE_URL={fake.url.replace('http://', 'http://***@')} is a local test server"
    log = (state / "trade.log").read_text()
    assert warning in run.stderr and warning in log
    assert f"alert webhook http://127.0.0.1:{port}/*** failed: " in log
    assert f"endpoint │ {endpoint}" in " ".join(status.stdout.split())
    assert endpoint in (state / "status.html").read_text()
    texts = [run.stdout, run.stderr, status.stdout, status.stderr]
    for secret in ("Bk-7c6b5a49", "Hk-5e4d3c2b", "trader:", "hook:"):
        assert leaks(secret, texts, state) == [], secret


def test_api_keys_a_broker_echoes_back_stay_out_of_stderr_the_log_and_alerts(tmp_path):
    state = tmp_path / "state"
    with embedded_fake("2018-07-20") as fake:
        fake.fail("GET", "/v2/account", status=500, echo_headers=True, times=10)  # our headers, in its error
        run = trade(["run", "--broker", "alpaca", "--symbols", "SP500,NASDAQ", "--state-dir", str(state), "--once"],
                    alpaca_env(fake))
    assert run.returncode == 6, run.stderr
    [error] = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    assert "HTTP 500" in error and "'APCA-API-KEY-ID': '***'" in error and "'APCA-API-SECRET-KEY': '***'" in error
    assert "account: HTTP 500, retry 1/3" in (state / "trade.log").read_text()
    for secret in (KEY, SECRET):
        assert leaks(secret, [run.stdout, run.stderr], state) == [], secret


def test_each_secret_form_of_issue_43_stays_out_of_every_line_and_file(paper_data, tmp_path):
    """The forms that leaked: a config error echoing a webhook without a scheme, an environment webhook with
    userinfo, a one-word ntfy topic in trade.log and --print-config; each written, then grepped for in stdout,
    stderr and every byte of the state folder."""
    data, clock = paper_data
    state, port = tmp_path / "state", dead_port()
    slack = "hooks.slack.com/services/T0AAAA/B0BBBB/XOXSECRET1234"  # no scheme: refused, and not echoed
    (tmp_path / "marketcast.toml").write_text(f'[trade.alerts]\nwebhook = "{slack}"\n')
    common = ["--data-dir", str(data), "--state-dir", str(state), "--clock-file", str(clock)]
    runs = {"config file": trade(["run", "--once", "--config", str(tmp_path / "marketcast.toml"), *common]),
            "environment": trade(["run", "--once", *common],
                                 {**PAPER_ENV, "MARKETCAST_TRADE_ALERTS_WEBHOOK": "ftp://alerter:Pw-93x7@h.example/x"})}
    for where, run in runs.items():
        assert run.returncode == 2 and run.stdout == "", (where, run.stderr)
        [line] = run.stderr.strip().splitlines()
        assert line.startswith("error: alerts.webhook = ") and "is not an http:// or https:// URL" in line, line
    assert "= '***' (trade.alerts.webhook in" in runs["config file"].stderr
    assert "= 'ftp://h.example/***' (MARKETCAST_TRADE_ALERTS_WEBHOOK)" in runs["environment"].stderr
    assert not state.exists()  # refused before the state folder
    topic = "quietotterbridge"
    ntfy = ["--webhook", f"https://ntfy.sh/{topic}"]  # shown, never posted to: --print-config
    config = trade(["run", "--print-config", *common, *ntfy])
    assert config.returncode == 0 and "https://ntfy.sh/***" in config.stdout, config.stderr
    run = trade(["run", "--symbols", "SP500,NASDAQ", "--once", "--alert-latency", "0", *common,
                 "--webhook", f"http://127.0.0.1:{port}/{topic}"])  # the same form on a port nobody listens on
    assert run.returncode == 0, run.stderr
    assert f"alert webhook http://127.0.0.1:{port}/*** failed: " in (state / "trade.log").read_text()
    status = trade(["status", "--state-dir", str(state), "--html"])
    texts = [t for p in [*runs.values(), config, run, status] for t in (p.stdout, p.stderr)]
    for secret in ("XOXSECRET1234", "T0AAAA", "B0BBBB", "alerter", "Pw-93x7", topic):
        assert leaks(secret, texts, state) == [], secret
