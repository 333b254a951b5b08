"""Secrets never leave the process in text: every registered key, and every secret a URL can carry, is replaced
by ``***`` in errors, log records, records, alerts and status.

A webhook's URL is its credential (Slack: "Keep it secret, keep it safe. Your webhook URL contains a secret",
https://api.slack.com/messaging/webhooks), and secrets in URLs end up in logs (OWASP, "Information exposure
through query strings in URL", https://owasp.org/www-community/vulnerabilities/Information_exposure_through_query_strings_in_url).
So a URL in any text (``scheme://...``, ``file:`` aside) keeps what says *where* and loses what lets one *in*:

* scheme, host and port are kept;
* userinfo goes: ``https://user:pass@host/`` -> ``https://***@host/``;
* the whole path goes, every segment of it, since a one-word segment can be the secret (anyone who knows an
  ntfy topic can read and post to it, https://docs.ntfy.sh/): ``https://ntfy.sh/quietotterbridge`` ->
  ``https://ntfy.sh/***``; ``https://hooks.slack.com/services/T000/B000/XXXX`` -> ``https://hooks.slack.com/***``;
* every query value goes, its key stays: ``?token=abc&x=1`` -> ``?token=***&x=***``; a fragment is ``#***``.

``https://paper-api.alpaca.markets`` carries nothing of that and stays as it is. Redacting twice gives the same
text as once. A value that may be a credential as a whole (a setting such as ``alerts.webhook``, which an error
line names) is shown by :func:`redact_secret`: its scheme and host, or ``***`` when it is no URL.
"""

from __future__ import annotations

import logging
import re

_SECRETS: set[str] = set()
MASK = "***"
_URL = re.compile(r"(?<![\w.+-])([a-zA-Z][a-zA-Z0-9+.-]*)://([^\s'\"<>`]+)")
_TRAILING = ".,;:!?)]}"  # sentence punctuation after a URL, not part of it


def register_secrets(*values: str) -> None:
    _SECRETS.update(v for v in values if v)


def redact_url(url: str) -> str:
    """``url`` without userinfo, path tokens, query values or fragment (the module's rule)."""
    match = _URL.fullmatch(url)
    return url if match is None else _url(match)


def _url(match: re.Match) -> str:
    scheme, rest = match.group(1), match.group(2)
    if scheme.lower() == "file":
        return match.group(0)
    stripped = rest.rstrip(_TRAILING)
    tail = rest[len(stripped):]
    rest, fragment = stripped.partition("#")[::2] if "#" in stripped else (stripped, None)
    rest, query = rest.partition("?")[::2] if "?" in rest else (rest, None)
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = f"{MASK}@{authority.rpartition('@')[2]}"
    out = f"{scheme}://{authority}{slash}"
    if path:
        out += MASK
    if query is not None:
        out += "?" + "&".join(f"{p.partition('=')[0]}={MASK}" if "=" in p else MASK if p else ""
                              for p in query.split("&"))
    if fragment is not None:
        out += f"#{MASK}"
    return out + tail


def redact_secret(value: object) -> str:
    """A value that may be a credential as a whole: a URL's scheme and host (``ftp://user:pw@h/x`` ->
    ``ftp://h/***``), anything else ``***``."""
    match = _URL.search(str(value))
    if match is None:
        return MASK
    host = re.split(r"[/?#]", match.group(2), maxsplit=1)[0].rpartition("@")[2]
    return f"{match.group(1)}://{host}/{MASK}" if host else MASK


def redact(text: object) -> str:
    """``text`` with every registered key, and the secret parts of every URL in it, replaced by ``***``."""
    out = str(text)
    for s in _SECRETS:
        out = out.replace(s, MASK)
    return _URL.sub(_url, out) if "://" in out else out


class RedactingFilter(logging.Filter):
    """Scrubs keys and URL secrets from a log record: its message, arguments and traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redact(record.getMessage()), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True
