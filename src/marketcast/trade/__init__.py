"""Paper and live trading loop: ``marketcast trade run | status | orders | reconcile | resume | replay``.

Rooms, lowest first, importing one way down (the import-linter contracts in pyproject.toml keep it so):

* ``types``: the vocabulary every room speaks (orders, fills, positions, the account, what an asset allows),
  and ``interface``: the :class:`~marketcast.trade.interface.Broker` the loop reaches a broker through.
* ``journal/``: the write-ahead journal (``state``, ``db``), ``halts``, the ``lock``, owner-only ``files``, ``ids``.
* ``ops/``: ``alerts``, ``monitor`` (records), ``status``, ``blotter``, ``redact``.
* ``risk/``: may this order go? ``check`` runs, in order: ``freshness``, ``gates``, ``portfolio`` (sizing under
  caps), the venue's ``rules`` and ``protections`` asked by the ``precheck``, and the ``limits`` (the halted state
  a breach puts the loop in, ``lift``); ``markets``: what the loop may trade and on which bars (the market check and
  the calendar filter ``trade run`` and ``trade replay`` share).
* ``loop/`` (``cycle``: reconcile -> plan -> check -> submit -> record; ``supervisor``, ``planner``, ``orders``,
  ``reconcile``, ``ownership``, ``exits``, ``quotes``, ``feed``, ``warmup``, ``shadow``) and, beside it and never
  imported by it, ``venues/``: ``paper`` (embedded SQLite broker, fills by the backtest's rule) and ``alpaca``
  (alpaca-py, with ``alpaca_data`` and ``endpoints``), the only code that talks to a broker.
* the wiring, ``launch`` (venues, clocks, logging), and at the top the two entries: ``start`` (the live or paper
  loop under the rules the settings decide) and ``replay`` (the loop over history). The ``trade`` commands and
  their settings live in :mod:`marketcast.commands`; only the wiring builds a venue.
* beside the entries, ``test_kit/``: the loop wired to the fake Alpaca (:mod:`marketcast.fake_alpaca`, a package
  of its own, written apart from these rooms) that the tests and ``benchmarks/trade_chaos.py`` run against (it
  wires a loop to the fake, so it sits at the top); no product room imports either.
"""
