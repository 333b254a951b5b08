"""Deterministic order ids: what must be unique is (symbol, decision bar, order role), so that is the key.

A restarted loop, or a second pass over the same bar that picks another strategy or side, derives the same
id for the same role and finds the earlier order instead of placing a second one. Every id starts with
:data:`PREFIX`: an order without it (a take-profit leg aside, which follows its parent) is not the loop's.
"""

from __future__ import annotations

import hashlib

PREFIX = "mc-"
MAX_LEN = 48  # Alpaca's limit for client_order_id
ENTRY, CLOSE, TAKE_PROFIT = "entry", "close", "take_profit"
FLATTEN = "flatten"  # a risk halt with flatten_on_halt closing the loop's quantity at market
TOP_UP = "top_up"  # a held position bought up toward the bar's target quantity (LoopConfig.hold_agreeing)
# the market-on-close exit (time in force cls) of a position, sent while its session trades (exit rule `close`;
# marketcast.trade.loop.on_close): journalled under the bar of what it exits, apart from a leftover CLOSE
ON_CLOSE = "on_close"


def client_order_id(symbol: str, decision_ts: str, role: str) -> str:
    """``mc-`` + 24 hex chars of sha256(symbol|decision bar|role). ``role`` is ``entry``, ``close`` or
    ``take_profit@<filled qty>`` (one separate take-profit per fill level), ``on_close`` (a market-on-close
    exit), ``top_up`` and its take-profit for the
    whole position ``take_profit@top_up@<filled qty>``; a risk halt's are
    ``take_profit@halt@<qty>`` and ``flatten@<qty>``."""
    key = "|".join((symbol.upper(), decision_ts, role)).encode()
    cid = PREFIX + hashlib.sha256(key).hexdigest()[:24]
    assert len(cid) <= MAX_LEN
    return cid


def is_loops(client_order_id: str | None) -> bool:
    return bool(client_order_id) and client_order_id.startswith(PREFIX)
