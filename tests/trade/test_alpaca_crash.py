"""Kill a real loop process against the fake Alpaca right after the broker booked an order and before its reply
reached the loop (the fake SIGKILLs it there), restart it, and compare with an uninterrupted run: no order
sent twice, the same orders, fills, cash and positions."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("alpaca")

from .alpaca_env import alpaca_loop, embedded_fake  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
START, END = "2018-06-04", "2018-06-22"


def fresh_fake():
    from marketcast.data import load_symbol

    fake = embedded_fake(END)
    before = load_symbol("SP500").frame.loc[:START].index[-2]  # the day before the first one played
    fake.exchange.clock = before.strftime("%Y-%m-%dT21:00:00Z")
    return fake


def books(fake) -> dict:
    orders = sorted((o["client_order_id"], o["symbol"], o["side"], o["qty"], o["type"], o["limit_price"],
                     o["time_in_force"], o["status"], o["filled_qty"]) for o in fake.orders)
    return {"orders": orders, "cash": fake.exchange.cash, "positions": fake.positions}


def test_a_kill_between_the_brokers_booking_and_the_journal_never_duplicates_an_order(tmp_path):
    from marketcast.data import load_symbol

    with fresh_fake() as ref:  # the uninterrupted run, in this process
        loop = alpaca_loop(ref, tmp_path / "reference", ("SP500", "NASDAQ"), monitor=True,
                           strategies=("maxdiff",))
        for ts in load_symbol("SP500").frame.loc[START:END].index:
            ref.session(ts)
            loop.run_cycle(ts.isoformat())
        reference, total = books(ref), ref.order_posts
    assert total >= 12, total
    kills = {2, total // 3, total // 2, total - 1}  # after the n-th order POST is booked, before its reply
    with fresh_fake() as fake:
        fake.kill_on_post = set(kills)
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
        killed = 0
        for _ in range(len(kills) + 2):
            proc = subprocess.Popen([sys.executable, "-m", "tests.trade.alpaca_driver", fake.url,
                                     str(tmp_path / "crashed"), START, END], cwd=ROOT, env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            fake.victim_pid = proc.pid
            _, err = proc.communicate(timeout=300)
            if proc.returncode == 0:
                break
            assert proc.returncode == -signal.SIGKILL, err
            killed += 1
        assert proc.returncode == 0 and killed == len(kills)
        posts = [b["client_order_id"] for m, p, b in fake.requests if m == "POST" and p == "/v2/orders"]
        assert len(posts) == len(set(posts)) == total  # every order sent once: 0 duplicates, none lost
        assert fake.rejections == []  # not even a duplicate-id refusal: the restart asked first
        assert books(fake) == reference
