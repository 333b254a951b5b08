"""The trade test kit: the real loop wired to the fake Alpaca (:mod:`marketcast.fake_alpaca`, a package of its own
written apart from the trade rooms), kept in the package (as NautilusTrader keeps its ``test_kit``) so the tests
and ``benchmarks/trade_chaos.py`` share it without the benchmarks importing ``tests``.

* ``alpaca_env``: the environment that points a loop at the fake (fake keys, the adapter, a loop over it).
* ``alpaca_driver``: a loop in a subprocess (``python -m marketcast.trade.test_kit.alpaca_driver``), and
  ``chaos``: the harness that SIGKILLs it mid-order and compares the books with an uninterrupted run.
* ``synthetic``: the seeded 24/7 crypto series the harness trades beside a stock (a random walk, not data).

Never imported by the product code (a forbidden contract in pyproject.toml keeps it so).
"""
