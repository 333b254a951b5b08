"""The SIGKILL harness: a real loop process (:mod:`marketcast.trade.test_kit.alpaca_driver`) against the fake
Alpaca, killed right after the broker booked an order POST or took a cancel and before the reply reached the loop,
restarted until it finishes, then compared with an uninterrupted run in this process. Used by
``tests/trade/test_alpaca_crash.py`` (a few kills) and ``benchmarks/trade_chaos.py`` (every POST and DELETE,
200+).

It trades on both clocks: the embedded SP500 as a stock (cycles on NYSE sessions) beside ETH/USD on a seeded
synthetic 24/7 series (:mod:`marketcast.trade.test_kit.synthetic`; cycles on every calendar day, weekends
included), each clock with cycles of its own as ``trade replay`` runs them. The fake holds positions overnight
and works crypto's good-till-cancelled orders across days, so a bar's leftovers are cancelled and then closed:
the cancel-then-submit path a kill between the two must not break."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from marketcast.trade.test_kit.alpaca_env import SRC, alpaca_loop, embedded_fake
from marketcast.trade.test_kit.synthetic import crypto_frame

SYMBOLS, CLASSES = ("SP500", "ETHUSD"), {"SP500": "stock", "ETHUSD": "crypto"}
CRYPTO_FROM = "2015-01-01"  # the synthetic series' first day: years of history for the planner's windows
CRYPTO_SEED = 5  # a walk MaxDiff trades on (seed 7's falls through 2018 and MaxDiff stays flat: no crypto orders)


def chaos_loop(fake, state: Path):
    """The loop both runs use: MaxDiff limits on the stock, and pinned on ETH/USD (on this walk the walk-forward
    pick is no trade, and a kill needs orders on weekends)."""
    from marketcast.forecast import load_forecaster
    from marketcast.trade.loop.planner import BacktestPlanner

    planner = BacktestPlanner(load_forecaster("baseline"), strategies=("maxdiff",), pinned={"ETHUSD": "maxdiff"})
    return alpaca_loop(fake, state, SYMBOLS, CLASSES, planner=planner, monitor=True)


def cycles(start: str, end: str) -> list[tuple[str, tuple[str, ...]]]:
    """Each calendar day of [start, end] and the clocks due on it: crypto every day, the stock on the embedded
    SP500's sessions (in the loop's clock order: stock first, as :meth:`TradingLoop.clocks` lists them)."""
    from marketcast.data import load_symbol

    sessions = set(load_symbol("SP500").frame.loc[start:end].index)
    return [(ts.isoformat(), ("stock", "crypto") if ts in sessions else ("crypto",))
            for ts in pd.date_range(start, end, freq="D", tz="UTC")]


def fresh_fake(start: str, end: str):
    fake = embedded_fake(end, crypto={"ETHUSD": crypto_frame(CRYPTO_FROM, end, seed=CRYPTO_SEED)})
    before = pd.Timestamp(start, tz="UTC") - pd.Timedelta(days=1)  # the day before the first one played
    fake.exchange.clock = before.strftime("%Y-%m-%dT21:00:00Z")
    return fake


def books(fake) -> dict:
    orders = sorted((o["client_order_id"], o["symbol"], o["side"], o["qty"], o["type"], o["limit_price"],
                     o["time_in_force"], o["status"], o["filled_qty"]) for o in fake.orders)
    return {"orders": orders, "cash": fake.exchange.cash, "positions": fake.positions}


def weekend(clock: str) -> bool:
    """A kill (or call) at the fake's ``clock`` landed on a Saturday or Sunday: only crypto cycles run then."""
    return pd.Timestamp(clock).dayofweek >= 5


def before_submit(calls: list[tuple[str, str]], i: int) -> bool:
    """``calls[i]`` is a cancel whose cycle goes on to submit (the next order call is a POST on the same
    clock): a kill there lands between a cancel and the following submit."""
    return calls[i][0] == "DELETE" and i + 1 < len(calls) and calls[i + 1] == ("POST", calls[i][1])


def lost_fills(expected: dict, got: dict) -> int:
    """Orders the uninterrupted run's books show filled whose fill the crashed run's books lack (or differ in)."""
    filled = {o[0]: o[-1] for o in got["orders"]}
    return sum(1 for o in expected["orders"] if o[-1] != "0" and filled.get(o[0]) != o[-1])


@dataclass
class Reference:
    books: dict
    posts: int
    deletes: int
    calls: list[tuple[str, str]]  # (method, clock) of each booked POST and taken DELETE, in order
    overnight: dict[str, int]  # symbol -> days that ended with a position held (into the next day)
    at: dict[str, dict]  # the books after each stage's last day

    def kill_point(self, i: int) -> tuple[str, int]:
        """The i-th order call as a kill point: ("POST", n) for the n-th POST, ("DELETE", n) likewise."""
        method = self.calls[i][0]
        return method, sum(m == method for m, _ in self.calls[: i + 1])


def reference(state: Path, start: str, end: str, stages: tuple[str, ...] = ()) -> Reference:
    """The uninterrupted run: every day played, each due clock's cycle run once; the books are kept after the
    last day of each of ``stages`` (dates in the span) to compare a crashed run with as it goes."""
    with fresh_fake(start, end) as ref:
        loop = chaos_loop(ref, state)
        overnight: dict[str, int] = {}
        at: dict[str, dict] = {}
        ends = {pd.Timestamp(d, tz="UTC").isoformat(): d for d in stages}
        for key, clocks in cycles(start, end):
            ref.session(key)
            for clock in clocks:
                loop.run_cycle(key, clock=clock)
            for p in ref.positions:
                overnight[p["symbol"]] = overnight.get(p["symbol"], 0) + 1
            if key in ends:
                at[ends[key]] = books(ref)
        return Reference(books(ref), ref.order_posts, ref.order_deletes, list(ref.order_calls), overnight, at)


@dataclass
class Chaos:
    killed: int
    returncode: int
    posts: list[str]  # client order ids of every order POST the fake saw, in order
    rejections: list
    books: dict
    weekend_kills: int  # kills on a Saturday or Sunday (crypto cycles)
    cancel_submit_kills: int  # kills after a cancel whose cycle went on to submit


def chaos(state: Path, start: str, end: str, kill_posts: set[int], kill_deletes: set[int],
          timeout_s: float = 300, stages: tuple[str, ...] = (),
          on_stage: Callable[[str, Chaos], None] | None = None) -> Chaos:
    """Run the driver until it finishes, SIGKILLed after each chosen POST and DELETE (counted over the run).
    With ``stages`` (dates in the span) the driver is run to each in turn (one replay: the fake, its books and
    the journal go on), and ``on_stage`` hears how the run stands after each."""
    with fresh_fake(start, end) as fake:
        fake.kill_on_post, fake.kill_on_delete = set(kill_posts), set(kill_deletes)
        env = {**os.environ, "PYTHONPATH": SRC}
        killed, starts = 0, len(kill_posts) + len(kill_deletes) + len(stages) + 2
        for stage in (*[d for d in stages if d < end], end):
            while starts:
                starts -= 1
                proc = subprocess.Popen([sys.executable, "-m", "marketcast.trade.test_kit.alpaca_driver", fake.url,
                                         str(state), start, stage], cwd=state.parent, env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                fake.victim_pid = proc.pid
                _, err = proc.communicate(timeout=timeout_s)
                if proc.returncode == 0:
                    break
                assert proc.returncode == -signal.SIGKILL, err
                killed += 1
            with fake.lock:
                posts = [b["client_order_id"] for m, p, b in fake.requests if m == "POST" and p == "/v2/orders"]
                calls = list(fake.order_calls)
                run = Chaos(killed, proc.returncode, posts, list(fake.rejections), books(fake),
                            sum(weekend(calls[i][1]) for i in fake.kills),
                            sum(before_submit(calls, i) for i in fake.kills))
            if on_stage is not None:
                on_stage(stage, run)
        return run
