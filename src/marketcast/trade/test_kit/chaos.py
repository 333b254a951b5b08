"""The SIGKILL harness: a real loop process (:mod:`marketcast.trade.test_kit.alpaca_driver`) against the fake
Alpaca, killed right after the broker booked an order POST or took a cancel and before the reply reached the loop,
restarted until it finishes, then compared with an uninterrupted run in this process. Used by
``tests/trade/test_alpaca_crash.py`` (a few kills) and ``benchmarks/trade_chaos.py`` (every POST and DELETE,
200+)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from marketcast.trade.test_kit.alpaca_env import SRC, alpaca_loop, embedded_fake

# a stock and a crypto pair (NASDAQ's bars): crypto orders are good-till-cancelled, so a bar's leftovers are
# cancelled and then closed, the path a kill between a cancel and its close must not break
SYMBOLS, CLASSES = ("SP500", "NQUSD"), {"SP500": "stock", "NQUSD": "crypto"}


def fresh_fake(start: str, end: str):
    from marketcast.data import load_symbol

    fake = embedded_fake(end, crypto={"NQUSD": "NASDAQ"})
    before = load_symbol("SP500").frame.loc[:start].index[-2]  # the day before the first one played
    fake.exchange.clock = before.strftime("%Y-%m-%dT21:00:00Z")
    return fake


def books(fake) -> dict:
    orders = sorted((o["client_order_id"], o["symbol"], o["side"], o["qty"], o["type"], o["limit_price"],
                     o["time_in_force"], o["status"], o["filled_qty"]) for o in fake.orders)
    return {"orders": orders, "cash": fake.exchange.cash, "positions": fake.positions}


@dataclass
class Reference:
    books: dict
    posts: int
    deletes: int


def reference(state: Path, start: str, end: str) -> Reference:
    """The uninterrupted run: every session played, one cycle per day."""
    from marketcast.data import load_symbol

    with fresh_fake(start, end) as ref:
        loop = alpaca_loop(ref, state, SYMBOLS, CLASSES, monitor=True, strategies=("maxdiff",))
        for ts in load_symbol("SP500").frame.loc[start:end].index:
            ref.session(ts)
            loop.run_cycle(ts.isoformat())
        return Reference(books(ref), ref.order_posts, ref.order_deletes)


@dataclass
class Chaos:
    killed: int
    returncode: int
    posts: list[str]  # client order ids of every order POST the fake saw, in order
    rejections: list
    books: dict


def chaos(state: Path, start: str, end: str, kill_posts: set[int], kill_deletes: set[int],
          timeout_s: float = 300) -> Chaos:
    """Run the driver until it finishes, SIGKILLed after each chosen POST and DELETE (counted over the run)."""
    with fresh_fake(start, end) as fake:
        fake.kill_on_post, fake.kill_on_delete = set(kill_posts), set(kill_deletes)
        env = {**os.environ, "PYTHONPATH": SRC}
        killed = 0
        for _ in range(len(kill_posts) + len(kill_deletes) + 2):
            proc = subprocess.Popen([sys.executable, "-m", "marketcast.trade.test_kit.alpaca_driver", fake.url,
                                     str(state), start, end], cwd=state.parent, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
            fake.victim_pid = proc.pid
            _, err = proc.communicate(timeout=timeout_s)
            if proc.returncode == 0:
                break
            assert proc.returncode == -signal.SIGKILL, err
            killed += 1
        posts = [b["client_order_id"] for m, p, b in fake.requests if m == "POST" and p == "/v2/orders"]
        return Chaos(killed, proc.returncode, posts, list(fake.rejections), books(fake))
