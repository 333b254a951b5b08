"""Keys never leave the process in text: errors and log records have every registered key replaced by ``***``."""

from __future__ import annotations

import logging

_SECRETS: set[str] = set()


def register_secrets(*values: str) -> None:
    _SECRETS.update(v for v in values if v)


def redact(text: object) -> str:
    """``text`` with every registered key replaced by ``***``."""
    out = str(text)
    for s in _SECRETS:
        out = out.replace(s, "***")
    return out


class RedactingFilter(logging.Filter):
    """Scrubs registered keys from a log record's message and arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _SECRETS:
            record.msg = redact(record.getMessage())
            record.args = None
        return True
