"""Deterministic order ids: the same decision always gets the same ``client_order_id``.

A restarted loop recomputes the id and finds the earlier order instead of placing a second one.
"""

from __future__ import annotations

import hashlib

PREFIX = "mc-"
MAX_LEN = 48  # Alpaca's limit for client_order_id


def client_order_id(strategy: str, symbol: str, decision_ts: str, side: str) -> str:
    """``mc-`` + 24 hex chars of sha256(strategy|symbol|decision bar|side)."""
    key = "|".join((strategy, symbol.upper(), decision_ts, side)).encode()
    cid = PREFIX + hashlib.sha256(key).hexdigest()[:24]
    assert len(cid) <= MAX_LEN
    return cid
