"""The trade test kit: a fake Alpaca to run the real loop against, kept in the package (as NautilusTrader keeps its
``test_kit``) so the tests and ``benchmarks/trade_chaos.py`` share it without the benchmarks importing ``tests``.

* ``fake_alpaca``: a local Alpaca REST server (127.0.0.1) with Alpaca's shapes, and ``fake_exchange``: the
  account behind it, its rules written apart from the loop's (the loop must not grade its own homework).
* ``fake_market``: the market data it serves, its NYSE clock and its bars.
* ``alpaca_env``: the environment that points a loop at it (fake keys, the adapter, a loop over the fake).
* ``alpaca_driver``: a loop in a subprocess (``python -m marketcast.trade.test_kit.alpaca_driver``), and
  ``chaos``: the harness that SIGKILLs it mid-order and compares the books with an uninterrupted run.

Never imported by the product code (a forbidden contract in pyproject.toml keeps it so).
"""
