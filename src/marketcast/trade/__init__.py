"""Paper and live trading loop: ``marketcast trade run | status | reconcile | replay``.

Layout (decision code never imports a concrete broker):

* ``types``/``broker``: data types and the :class:`~marketcast.trade.broker.Broker` interface;
  ``paper`` (embedded SQLite broker, fills by ``marketcast.backtest.fills.settle``) and ``alpaca``
  (alpaca-py, imported lazily; ``endpoints`` picks its host from the flags, ``redact`` scrubs keys).
* ``rules``: what the broker accepts (price grid, sizes, time in force, shorts, buying power).
* ``cycle``: one cycle, orchestrated: ``reconcile`` (journal vs broker, fail closed, stale cancels, closes),
  plan (``planner``, ``quotes``, ``gates``, ``portfolio``), check (``rules``), submit (``orders``), record
  (``monitor``).
* ``state`` (write-ahead journal), ``halts`` (the halted state), ``ownership`` (what the loop owns),
  ``ids`` (deterministic ``client_order_id``), ``lock`` (one loop per state folder), ``db`` (SQLite).
* ``feed``, ``replay``, ``launch`` and ``cli`` (the commands).
"""
