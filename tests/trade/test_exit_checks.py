"""Exits and closes are asked of the loop's one RiskCheck, never checked by the loop itself: a close or a
take-profit the venue would refuse is refused through :meth:`RiskCheck.exit` with the venue's words, the loop
builds one RiskCheck and PreCheck and shares them, and no module of trade/loop conforms or clears an order."""

from __future__ import annotations

import ast
from pathlib import Path

from marketcast.trade.journal.ids import CLOSE, TAKE_PROFIT, client_order_id
from marketcast.trade.journal.state import Intent
from marketcast.trade.risk.limits import RiskLimits
from marketcast.trade.test_kit.alpaca_env import D0, D1, alpaca_loop, order, submitted
from marketcast.trade.types import LIMIT, SELL

LOOP = Path(__file__).resolve().parents[2] / "src" / "marketcast" / "trade" / "loop"
NOT_TRADABLE = "asset AAPL is not tradable"


def test_a_close_and_a_take_profit_the_venue_would_refuse_are_refused_through_the_risk_check(fake, tmp_path):
    """D0's long is left over at D1 and the venue stopped trading AAPL: the close is refused, journalled with
    the venue's reason and never posted; a take-profit for it meets the same verdict."""
    loop = alpaca_loop(fake, tmp_path)
    submitted(loop, order("mc-d0", take_profit=None), D0)
    fake.fill("mc-d0", 10, 188.5, at="2024-04-30T15:00:00Z")
    fake.exchange.assets["AAPL"]["tradable"] = False
    loop = alpaca_loop(fake, tmp_path)  # a fresh process: no asset cached from before
    close_id = client_order_id("AAPL", D1, CLOSE)
    r = loop.reconcile(D1)
    assert r.closes == [] and r.deferred == {} and fake.posts(close_id) == 0 and fake.rejections == []
    close = loop.journal.intent(close_id)
    assert (close.kind, close.status, close.error, close.qty) == (CLOSE, "refused", NOT_TRADABLE, 10)
    verdict = loop.checks.exit(close)
    assert (verdict.order, verdict.reasons, verdict.refusal, verdict.waits) == (None, (NOT_TRADABLE,),
                                                                               NOT_TRADABLE, None)
    tp = Intent(client_order_id("AAPL", D1, f"{TAKE_PROFIT}@10"), D1, TAKE_PROFIT, "AAPL", SELL, 10, LIMIT, 199.0,
                None, "day", kind=TAKE_PROFIT)
    assert loop.checks.exit(tp).refusal == NOT_TRADABLE and loop.journal.intent(tp.client_order_id) is None


def test_a_take_profit_the_venue_takes_goes_on_its_grid_with_no_notional_limit(fake, tmp_path):
    """An exit reduces: a notional limit far under its value does not hold it back, and its price is put on
    the venue's penny grid (rounded away from the fill, as a sell's limit is)."""
    loop = alpaca_loop(fake, tmp_path, loop_config={"risk": RiskLimits(max_notional_per_order=100.0)})
    submitted(loop, order("mc-d0", take_profit=None), D0)
    fake.fill("mc-d0", 10, 188.5, at="2024-04-30T15:00:00Z")
    tp = Intent(client_order_id("AAPL", D1, f"{TAKE_PROFIT}@10"), D1, TAKE_PROFIT, "AAPL", SELL, 10, LIMIT, 199.004,
                None, "day", kind=TAKE_PROFIT)
    verdict = loop.checks.exit(tp)
    assert verdict.refusal is None and verdict.waits is None and verdict.breach is None
    assert (verdict.order.limit_price, verdict.order.qty) == (199.01, 10) and verdict.changes


def test_the_loop_builds_one_risk_check_and_shares_it(fake, tmp_path):
    loop = alpaca_loop(fake, tmp_path)
    assert loop.checks is loop.checks and loop.exits.checks is loop.checks and loop.risk.keeper is loop.exits
    assert loop.checks.limits is loop.risk and loop.checks.desk is loop.desk is loop.checks.precheck.desk
    built = {name: [] for name in ("RiskCheck", "PreCheck")}
    for path in sorted(LOOP.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in built:
                built[node.func.id].append(path.name)
    assert built == {"RiskCheck": ["cycle.py"], "PreCheck": ["cycle.py"]}


def test_no_module_of_the_loop_conforms_or_clears_an_order_itself():
    """The loop asks the risk room once per order: it never calls the grid (``conformed``), the rules model
    (``refusals``) or the pre-check's ``clear`` on its own."""
    calls = []
    for path in sorted(LOOP.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("conformed", "clear", "refusals") and (node.args or node.keywords)):
                calls.append(f"{path.name}:{node.lineno} .{node.func.attr}(")
    assert calls == []
