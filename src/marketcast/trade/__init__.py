"""Paper and live trading loop: ``marketcast trade run | status | replay``.

Layout (decision code never imports a concrete broker):

* ``types``/``broker``: data types and the :class:`~marketcast.trade.broker.Broker` interface.
* ``paper``: embedded SQLite broker, fills by ``marketcast.backtest.fills.settle``; replay clock.
* ``alpaca``: adapter over alpaca-py (optional extra, imported lazily).
* ``state``: write-ahead journal; ``ids``: deterministic ``client_order_id``.
* ``planner``: the seam to the backtest engine (``Planner.plan(bars, costs, learn_from) -> Signal``).
* ``gates``, ``portfolio``, ``cycle``, ``feed``, ``monitor``, ``replay``, ``cli``.
"""
