"""What the Alpaca tests share: fake keys, the adapter pointed at the fake, a loop over it."""

from __future__ import annotations

from pathlib import Path

from marketcast.trade.types import OrderRequest

KEY, SECRET = "PKFAKEKEYZ9Q7W3E5R1T", "sEcReT-fake-9f8e7d6c5b4a3f2e1d0c"
SRC = str(Path(__file__).resolve().parents[3])  # the folder holding marketcast: a subprocess's PYTHONPATH
D0, D1, D2 = "2024-04-28T04:00:00+00:00", "2024-04-29T04:00:00+00:00", "2024-04-30T04:00:00+00:00"


def embedded_fake(end: str, crypto: dict | None = None):
    """A fake Alpaca serving the embedded SP500 and NASDAQ as stocks (plus ``crypto``: pair -> the embedded
    series whose bars it trades on, or a frame of its own) up to ``end``, its clock at that bar's close, the
    stocks quoted there."""
    from marketcast.data import load_symbol

    from marketcast.fake_alpaca.server import CRYPTO, STOCK, FakeAlpaca, bars_of

    crypto = crypto or {}
    frames = {s: load_symbol(s).frame.loc[:end] for s in ("SP500", "NASDAQ")}
    fake = FakeAlpaca(KEY, SECRET, assets={"SP500": dict(STOCK), "NASDAQ": dict(STOCK),
                                           **{pair: dict(CRYPTO) for pair in crypto}})
    fake.bars = {**{s: bars_of(f) for s, f in frames.items()},
                 **{f"{pair[:-3]}/USD": bars_of(frames[src] if isinstance(src, str) else src.loc[:end])
                    for pair, src in crypto.items()}}
    fake.exchange.clock = frames["SP500"].index[-1].strftime("%Y-%m-%dT21:00:00Z")
    fake.quotes = {s: {"bp": float(f["close"].iloc[-1]) - 0.01, "ap": float(f["close"].iloc[-1]) + 0.01,
                       "t": fake.exchange.clock} for s, f in frames.items()}  # at the clock, a cent either side
    return fake


def adapter(fake, **kw):
    """The real AlpacaBroker (alpaca-py underneath) talking to ``fake``. Its timeout is generous: a loaded
    machine can stall a reply past half a second, and a timed-out submit is not retried; a timeout costs time
    only when it fires, and the tests of timeouts set a short one of their own."""
    from marketcast.trade.venues.alpaca import AlpacaBroker
    from marketcast.trade.venues.endpoints import Endpoint

    kw.setdefault("timeout_s", 5.0)
    kw.setdefault("max_retries", 2)
    kw.setdefault("max_retry_wait_s", 5.0)
    return AlpacaBroker(KEY, SECRET, endpoint=Endpoint(fake.url, "paper", custom=True), data_url=fake.url, **kw)


def order(cid="mc-000000000000000000000001", **kw) -> OrderRequest:
    kw = {"symbol": "AAPL", "side": "buy", "qty": 10, "limit_price": 188.5, "take_profit": 192.25, **kw}
    return OrderRequest(client_order_id=cid, **kw)


def alpaca_loop(fake, tmp_path, symbols=("AAPL",), classes=None, planner=None, cancel_wait_s=3.0, monitor=False,
                history=None, strategies=None, loop_config=None, **kw):
    """A loop over the adapter with its own journal connection, as a freshly (re)started process has;
    ``loop_config`` overrides fields of its LoopConfig."""
    from marketcast.forecast import load_forecaster
    from marketcast.trade.loop.cycle import LoopConfig, TradingLoop
    from marketcast.trade.loop.feed import broker_feed
    from marketcast.trade.risk.gates import GateConfig
    from marketcast.trade.ops.monitor import Monitor
    from marketcast.trade.loop.planner import BacktestPlanner
    from marketcast.trade.journal.state import Journal

    classes = classes or {s: "stock" for s in symbols}
    b = adapter(fake, asset_classes=classes, **kw)
    gates = GateConfig(min_edge=-1.0, min_sharpe=-1e9, max_drawdown=1.01, min_dollar_volume=0.0)
    return TradingLoop(b, Journal(Path(tmp_path) / "journal.db"),
                       planner or BacktestPlanner(load_forecaster("baseline"), strategies=strategies),
                       broker_feed(b, classes, **({"history": history} if history else {})),
                       LoopConfig(tuple(symbols), gates=gates, cancel_wait_s=cancel_wait_s, **(loop_config or {})),
                       Monitor(tmp_path) if monitor else None, classes)


def submitted(loop, request: OrderRequest, decision_ts: str, kind: str = "entry") -> None:
    """An order the loop sent on an earlier cycle: at the broker and journalled as submitted."""
    from marketcast.trade.journal.state import Intent

    placed = loop.broker.submit(request)
    r = request
    loop.journal.record_intent(Intent(r.client_order_id, decision_ts, "maxdiff", r.symbol, r.side, r.qty, r.type,
                                      r.limit_price, r.take_profit, r.time_in_force, kind=kind))
    loop.journal.mark(r.client_order_id, "submitted", placed.id, broker_status=placed.status)
