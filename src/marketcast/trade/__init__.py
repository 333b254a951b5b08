"""Paper and live trading loop: ``marketcast trade run | status | orders | reconcile | resume | replay``.

Rooms, importing one way down (``tests/trade/test_rooms.py`` keeps it so):

* ``broker/``: the :class:`~marketcast.trade.broker.interface.Broker` interface and its plain ``types``; the
  rules model (``rules``: what Alpaca accepts, shared by the paper broker, the fake Alpaca in the tests and the
  loop's own pre-check); the adapters ``paper`` (embedded SQLite broker, fills by the backtest's rule) and
  ``alpaca`` (alpaca-py, with ``alpaca_data`` and ``endpoints``), which only the wiring imports.
* ``journal/``: the write-ahead journal (``state``, ``db``), ``halts``, the ``lock``, owner-only ``files``, ``ids``.
* ``loop/``: ``cycle`` (reconcile -> plan -> check -> submit -> record), ``supervisor`` (per-clock cycles),
  ``planner``, ``orders``, ``reconcile``, ``ownership``, ``freshness``, ``gates``, ``quotes``, ``feed``, ``warmup``.
* ``ops/``: ``alerts``, ``monitor`` (records), ``status``, ``redact``.
* at the top: ``risk`` and ``portfolio`` (policy), and the wiring: ``launch``, ``replay`` (the ``trade``
  commands and their settings live in :mod:`marketcast.commands`).
"""
