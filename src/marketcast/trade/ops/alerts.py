"""Alerts: what a person watching the loop must hear about, in the log (WARNING/ERROR), as a JSON line in
``STATE_DIR/alerts.jsonl`` and, when a webhook URL is set, POSTed there as JSON.

The thresholds are the seeds' watch list: forecast latency ("inference time > 1 second"), memory growth,
recompiles after warm-up, a model that fell back to eager or failed to load, the chosen strategy's walk-forward
return or Sharpe below a floor ("returns drop significantly"), stale data, a halt, a broker that stays away.

A condition alerts when it starts (:meth:`Alerts.watch` is edge-triggered per kind and subject: a stale symbol
alerts once, not every tick) and again after it cleared and came back. A webhook that fails is a WARNING in the
log, never the end of the loop. Keys and URL secrets (the webhook's whole path, userinfo and query values) are
scrubbed from every alert and log line (:mod:`marketcast.trade.ops.redact`); the webhook itself is named by its
scheme and host only. A webhook's ``user:pass@`` goes as
HTTP Basic auth (RFC 7617), as curl and requests send it, never in the host name (urllib would look the whole
``user:pass@host`` up in DNS).
"""

from __future__ import annotations

import base64
import json
import logging
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from marketcast.trade.journal.files import append_line
from marketcast.trade.ops.redact import redact, redact_secret

log = logging.getLogger("marketcast.trade.ops.alerts")

ALERTS = "alerts.jsonl"


@dataclass(frozen=True)
class AlertThresholds:
    max_latency_s: float = 1.0  # forecast time of one symbol in one cycle
    max_memory_growth_mb: float = 512.0  # peak memory above what it was after warm-up
    max_recompiles: int = 0  # recompiles after warm-up
    min_return: float = -0.02  # the chosen strategy's walk-forward return over its lookback
    min_sharpe: float = -1.0  # ... and its Sharpe ratio


class Alerts:
    """Alerts of one loop: ``state_dir`` None writes no file (a dry run), ``webhook`` None posts nothing."""

    def __init__(self, state_dir: Path | None, webhook: str | None = None, timeout_s: float = 5.0) -> None:
        self.path = None if state_dir is None else Path(state_dir) / ALERTS
        self.webhook, self.timeout_s = webhook, timeout_s
        self.firing: set[tuple[str, str]] = set()

    def emit(self, kind: str, subject: str, message: str, level: str = "warning", console: bool = True,
             **details) -> dict:
        """Send one alert now: log (``console`` False: the log file only, when the command prints the same line
        as its error), ``alerts.jsonl``, webhook."""
        alert = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "kind": kind, "subject": redact(subject),
                 "level": level, "message": redact(message), "details": json.loads(redact(json.dumps(details,
                                                                                                  default=str)))}
        log.log(logging.ERROR if level == "error" else logging.WARNING, "ALERT %s: %s", kind, alert["message"],
                extra={"console": console})
        if self.path is not None:
            append_line(self.path, json.dumps(alert, sort_keys=True) + "\n")
        if self.webhook:
            self._post(alert)
        return alert

    def watch(self, kind: str, subject: str, firing: bool, message: str = "", level: str = "warning",
              **details) -> dict | None:
        """Edge-triggered: alert when ``(kind, subject)`` starts firing; forget it when it stops."""
        key = (kind, subject)
        if not firing:
            self.firing.discard(key)
            return None
        if key in self.firing:
            return None
        self.firing.add(key)
        return self.emit(kind, subject, message, level, **details)

    def _post(self, alert: dict) -> None:
        url, headers = self.webhook, {"Content-Type": "application/json"}
        parts = urlsplit(url)
        if "@" in parts.netloc:
            creds = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(creds).decode()
            url = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
        request = urllib.request.Request(url, data=json.dumps(alert).encode(), method="POST", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as reply:
                reply.read()
        except (urllib.error.URLError, OSError, ValueError) as exc:
            log.warning("alert webhook %s failed: %s", redact_secret(self.webhook),
                        redact(getattr(exc, "reason", exc)))


def cycle_alerts(alerts: Alerts, record: dict, thresholds: AlertThresholds, warm_memory_mb: float) -> None:
    """Check one cycle's record (see :mod:`marketcast.trade.ops.monitor`) against the thresholds."""
    t = thresholds
    for model, seconds in (record.get("forecast_latency_max_s") or {}).items():
        alerts.watch("latency", model, seconds > t.max_latency_s,
                     f"forecast latency {seconds:.3f} s per symbol > {t.max_latency_s:g} s", seconds=seconds)
    growth = record.get("peak_memory_mb", 0.0) - warm_memory_mb
    alerts.watch("memory", "process", growth > t.max_memory_growth_mb,
                 f"peak memory grew {growth:,.0f} MB since warm-up (> {t.max_memory_growth_mb:g} MB)",
                 peak_memory_mb=record.get("peak_memory_mb"))
    recompiles = record.get("recompiles_since_start", 0)
    alerts.watch("recompiles", str(recompiles), recompiles > t.max_recompiles,
                 f"{recompiles} recompiles since warm-up (> {t.max_recompiles})")
    for model in record.get("eager_fallback_models") or ():
        alerts.watch("eager_fallback", model, True, f"{model} fell back to eager (not compiled)")
    for symbol, c in (record.get("chosen") or {}).items():
        if c.get("strategy") in (None, "none"):
            continue
        low = c["return"] < t.min_return or c["sharpe"] < t.min_sharpe
        alerts.watch("strategy", symbol, low,
                     f"{symbol}: {c['strategy']}{' (pinned)' if c.get('pinned') else ''} walk-forward return "
                     f"{c['return']:+.2%}, Sharpe {c['sharpe']:.2f} (floors {t.min_return:+.2%}, {t.min_sharpe:.2f})",
                     **c)
    barred = record.get("account_restrictions") or {}  # the account's flags forbid orders (Account.restrictions)
    for what in sorted(barred.keys() | {s for kind, s in alerts.firing if kind == "account"}):
        alerts.watch("account", what, what in barred, barred.get(what, ""), level="error")
    held = record.get("unexpected") or {}  # the broker holds more than the journal: a split or an outside trade
    for symbol in sorted(held.keys() | {s for kind, s in alerts.firing if kind == "holdings"}):
        alerts.watch("holdings", symbol, symbol in held, held.get(symbol, ""))
