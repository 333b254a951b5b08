"""Alerts reach a real webhook on 127.0.0.1, alerts.jsonl and the log; they fire when a condition starts, not on
every look; a dead webhook never stops the loop; the seeds' thresholds, checked on a cycle's record."""

from __future__ import annotations

import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from marketcast.trade.ops.alerts import Alerts, AlertThresholds, cycle_alerts
from marketcast.trade.ops.redact import register_secrets


class Webhook:
    """A real HTTP server on 127.0.0.1 that keeps what is POSTed to it."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str, dict]] = []
        self.auth: list[str | None] = []  # each POST's Authorization header
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.received.append((self.path, self.headers["Content-Type"], json.loads(body)))
                hook.auth.append(self.headers.get("Authorization"))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook():
    hook = Webhook()
    yield hook
    hook.close()


def lines(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_an_alert_reaches_the_webhook_alerts_jsonl_and_the_log(tmp_path, webhook, caplog):
    caplog.set_level(logging.WARNING, "marketcast.trade.ops.alerts")
    register_secrets("sEcReT-in-an-alert")
    alerts = Alerts(tmp_path, webhook.url)
    sent = alerts.emit("halt", "loop", "trading is halted (risk): daily loss 5.10% (key sEcReT-in-an-alert)",
                       level="error", equity=94_900.0)
    [(path, content_type, body)] = webhook.received
    assert (path, content_type) == ("/alerts", "application/json")
    assert body == sent == lines(tmp_path / "alerts.jsonl")[0]
    assert body["kind"] == "halt" and body["level"] == "error" and body["details"] == {"equity": 94_900.0}
    assert body["message"] == "trading is halted (risk): daily loss 5.10% (key ***)"  # keys never leave
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("ERROR", "ALERT halt: trading is halted (risk): daily loss 5.10% (key ***)")]
    assert (tmp_path / "alerts.jsonl").stat().st_mode & 0o777 == 0o600


def test_a_condition_alerts_once_when_it_starts_and_again_after_it_cleared(tmp_path, webhook):
    alerts = Alerts(tmp_path, webhook.url)
    for firing in (True, True, True, False, False, True, True):
        alerts.watch("stale_data", "SP500", firing, "SP500: stale data")
    alerts.watch("stale_data", "NASDAQ", True, "NASDAQ: stale data")  # another subject alerts on its own
    assert [(a["kind"], a["subject"]) for a in lines(tmp_path / "alerts.jsonl")] == [
        ("stale_data", "SP500"), ("stale_data", "SP500"), ("stale_data", "NASDAQ")]
    assert len(webhook.received) == 3


def test_a_dead_webhook_is_a_warning_and_the_alert_is_still_kept(tmp_path, caplog):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    caplog.set_level(logging.WARNING, "marketcast.trade.ops.alerts")
    Alerts(tmp_path, f"http://127.0.0.1:{port}/x", timeout_s=2.0).emit("stale_data", "SP500", "SP500: stale")
    assert lines(tmp_path / "alerts.jsonl")[0]["message"] == "SP500: stale"
    assert caplog.records[-1].levelname == "WARNING"
    assert caplog.records[-1].getMessage().startswith(f"alert webhook http://127.0.0.1:{port}/*** failed: ")


def test_the_seeds_thresholds_on_a_cycles_record(tmp_path):
    alerts = Alerts(tmp_path)
    t = AlertThresholds(max_latency_s=1.0, max_memory_growth_mb=512.0, max_recompiles=0, min_return=-0.02,
                        min_sharpe=-1.0)
    quiet = {"forecast_latency_max_s": {"toto": 0.5}, "peak_memory_mb": 1500.0, "recompiles_since_start": 0,
             "eager_fallback_models": [], "chosen": {
                 "ETHUSD": {"strategy": "maxdiff", "pinned": True, "return": -0.019, "sharpe": -0.9},
                 "SP500": {"strategy": "none", "pinned": False, "return": 0.0, "sharpe": -5.0}}}
    cycle_alerts(alerts, quiet, t, warm_memory_mb=1000.0)  # every value on its good side of the threshold
    assert not (tmp_path / "alerts.jsonl").exists()
    loud = {"forecast_latency_max_s": {"toto": 1.2}, "peak_memory_mb": 1600.0, "recompiles_since_start": 2,
            "eager_fallback_models": ["toto"], "chosen": {
                "ETHUSD": {"strategy": "maxdiff", "pinned": True, "return": -0.021, "sharpe": 0.4}}}
    cycle_alerts(alerts, loud, t, warm_memory_mb=1000.0)
    got = [(a["kind"], a["subject"], a["message"]) for a in lines(tmp_path / "alerts.jsonl")]
    assert got == [
        ("latency", "toto", "forecast latency 1.200 s per symbol > 1 s"),
        ("memory", "process", "peak memory grew 600 MB since warm-up (> 512 MB)"),
        ("recompiles", "2", "2 recompiles since warm-up (> 0)"),
        ("eager_fallback", "toto", "toto fell back to eager (not compiled)"),
        ("strategy", "ETHUSD", "ETHUSD: maxdiff (pinned) walk-forward return -2.10%, Sharpe 0.40 "
                               "(floors -2.00%, -1.00)"),
    ]
    cycle_alerts(alerts, loud, t, warm_memory_mb=1000.0)  # the same conditions next cycle: no repeat
    assert len(lines(tmp_path / "alerts.jsonl")) == 5
