"""Kill a real replay subprocess with SIGKILL at random points, restart it, and compare with a run that
was never interrupted: no duplicate client_order_id sent, no lost fill, the same orders, cash, positions, and the
same ``trade status`` (cycles, orders, fills: counted from the journal, which the kills cannot make drift)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from marketcast.data import load_symbol
from marketcast.trade.venues.paper import PaperBroker
from marketcast.trade.journal.state import Journal
from marketcast.trade.ops.status import journal_counts, status_rows

SRC = str(Path(__file__).resolve().parents[2] / "src")
ARGS = ["replay", "--from", "2015-01-01", "--to", "2015-12-31", "--symbols", "SP500,NASDAQ"]
KILLS = 5


def _start(state: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "marketcast.commands", "trade", *ARGS, "--state-dir", str(state)],
                            env=dict(os.environ, PYTHONPATH=SRC), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _books(state: Path):
    bars = {s: load_symbol(s) for s in ("SP500", "NASDAQ")}
    broker = PaperBroker(state / "broker.db", bars, hold=True)  # a replay's broker holds as Alpaca does
    journal = Journal(state / "journal.db")
    orders = sorted((o.client_order_id, o.symbol, o.side, o.qty, o.limit_price, o.take_profit, o.status)
                    for o in broker.orders(limit=10_000))
    fills = sorted((f.fill_id, f.price, f.qty, f.fee, f.timestamp, f.kind) for f in broker.fills())
    books = dict(orders=orders, fills=fills, cash=broker.account().cash, positions=broker.positions(),
                 submit_log=broker.submit_log(), journal_fills=sorted(f.fill_id for f in journal.fills()),
                 intents=sorted((i.client_order_id, i.status) for i in journal.intents()), clock=broker.clock)
    counts = journal_counts(journal)
    broker.close()
    journal.close()
    books["status"] = {k: v for k, v in status_rows(state) if k in counts}  # what `trade status` prints
    return books


def test_sigkill_at_random_points_then_restart_matches_uninterrupted_run(tmp_path):
    ref_dir, crash_dir = tmp_path / "reference", tmp_path / "crashed"
    assert _start(ref_dir).wait(timeout=300) == 0
    reference = _books(ref_dir)
    total_cycles = _lines(ref_dir / "records.jsonl")
    # enough activity to crash into: a year, since with min_trades, each class's default costs and MaxDiff's ATR
    # grid the default gates let fewer orders through (2015: 56 orders, 10 of them filled, each entry and exit a fill)
    assert total_cycles > 100 and len(reference["orders"]) > 20 and len(reference["fills"]) >= 10

    rng = random.Random(20240607)
    interrupted = 0
    records = crash_dir / "records.jsonl"
    for _ in range(KILLS):
        before = _lines(records)
        proc = _start(crash_dir)
        deadline = time.monotonic() + 30
        while _lines(records) == before and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)  # wait until this run is inside its cycles ...
        time.sleep(rng.uniform(0.0, 0.5))  # ... then kill it at a random point
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            interrupted += 1
        proc.wait(timeout=30)
        assert _lines(records) < total_cycles or proc.returncode == 0
    assert interrupted >= 3, "the kills must land while the loop is running"
    assert _start(crash_dir).wait(timeout=300) == 0
    crashed = _books(crash_dir)

    accepted = [cid for cid, outcome in crashed["submit_log"] if outcome == "accepted"]
    assert len(accepted) == len(set(accepted))  # no client_order_id accepted twice
    assert [o for _, o in crashed["submit_log"] if o != "accepted"] == []  # never even re-sent
    assert crashed["orders"] == reference["orders"]
    assert crashed["fills"] == reference["fills"]  # no lost (or extra) fill
    assert crashed["journal_fills"] == sorted(f[0] for f in reference["fills"])
    assert crashed["cash"] == reference["cash"] and crashed["positions"] == reference["positions"]
    assert crashed["intents"] == reference["intents"] and crashed["clock"] == reference["clock"]
    assert crashed["status"] == reference["status"]
    assert int(reference["status"]["cycles"]) == total_cycles and int(reference["status"]["fills"]) == len(
        reference["fills"])
