"""One clock everywhere in a replay (issue 53 item 5): a risk halt's time is the simulated bar its reason names,
not the wall clock's; the replay's summary counts orders and fills as its blotter (``trade orders``) does, judged
against the paper broker's own books."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from marketcast.commands import main
from marketcast.data import load_symbol
from marketcast.errors import HaltedError
from marketcast.forecast import load_forecaster
from marketcast.trade.journal.state import Journal
from marketcast.trade.loop.cycle import LoopConfig
from marketcast.trade.loop.planner import BacktestPlanner
from marketcast.trade.replay import replay
from marketcast.trade.risk.gates import GateConfig
from marketcast.trade.risk.limits import RiskLimits
from marketcast.trade.venues.paper import PaperBroker

SYMS = ("SP500", "NASDAQ")
OPEN_GATES = GateConfig(min_edge=-1.0, min_sharpe=-1e9, max_drawdown=1.01)


def test_a_replays_risk_halt_is_dated_on_the_simulated_day_its_reason_names(tmp_path):
    bars = {s: load_symbol(s) for s in SYMS}
    config = LoopConfig(SYMS, gates=OPEN_GATES, risk=RiskLimits(max_orders_per_day=1))
    with pytest.raises(HaltedError) as halted:  # two entries on the first session: the second trips the limit
        replay(bars, BacktestPlanner(load_forecaster("baseline")), tmp_path, "2017-01-01", "2017-02-01", config)
    journal = Journal(tmp_path / "journal.db")
    [halt] = journal.halts.active()
    journal.close()
    day = re.search(r"would be order 2 on (\d{4}-\d{2}-\d{2}): max_orders_per_day 1", halt.reason).group(1)
    assert day == "2017-01-03"  # the first NYSE session of 2017
    assert pd.Timestamp(halt.since) == pd.Timestamp(day, tz="UTC")  # the bar the paper broker stood on
    assert str(halted.value).startswith(f"trading is halted since {halt.since} (risk): ")


def test_the_replay_summary_counts_orders_and_fills_as_the_blotter_does(tmp_path, capsys):
    """A holding replay of January 2017: entries with take-profit legs (the broker's orders, not the loop's rows),
    closes, and entries that expired unfilled."""
    state = tmp_path / "state"
    (tmp_path / "open.toml").write_text("[trade.gates]\nmin_edge = -1.0\nmin_sharpe = -1e9\nmax_drawdown = 1.01\n")
    assert main(["trade", "replay", "--from", "2017-01-01", "--to", "2017-02-01", "--hold", "--exit", "close", "--state-dir",
                 str(state), "--config", str(tmp_path / "open.toml")]) == 0
    summary = capsys.readouterr().out
    orders, filled = (int(x) for x in re.search(r"orders (\d+), filled (\d+)", summary).groups())
    assert main(["trade", "orders", "--state-dir", str(state), "--json"]) == 0
    blotter = json.loads(capsys.readouterr().out)
    assert (orders, filled) == (len(blotter), sum(r["filled_qty"] > 0 for r in blotter))
    # the judge: the paper broker's books. Each of the loop's orders it took (a leg is its entry's exit, not an
    # order of the loop) and each one the loop refused before sending; filled: those the broker filled
    broker = PaperBroker(state / "broker.db", {s: load_symbol(s) for s in SYMS}, hold=True)
    own = [o for o in broker.orders(limit=10**6) if o.parent_client_order_id is None]
    legs = len(broker.orders(limit=10**6)) - len(own)
    broker.close()
    journal = Journal(state / "journal.db")
    never_sent = journal.conn.execute("SELECT COUNT(*) FROM intents WHERE status != 'submitted'").fetchone()[0]
    journal.close()
    assert orders == len(own) + never_sent and filled == sum(o.filled_qty > 0 for o in own)
    assert legs >= 5 and len(own) - filled >= 3, (legs, len(own), filled)  # both miscounts were possible here
