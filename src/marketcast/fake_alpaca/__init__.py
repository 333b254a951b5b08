"""A fake Alpaca for the tests and the benchmarks, written from Alpaca's documentation alone: it imports nothing
of ``marketcast`` beyond itself (tests/trade/test_fake_alpaca_apart.py reads its imports; an import-linter
contract in pyproject.toml keeps it so), so the loop's rules model (``marketcast.trade.risk``) is judged by a
second reading of the same pages, not by itself.

* ``rules``: what the venue refuses, each rule cited to its page (and where the pages are silent, said so);
* ``exchange``: the account behind it (orders, positions, cash, flags, fills, sessions);
* ``server``: a local Alpaca REST server (127.0.0.1) with Alpaca's shapes;
* ``market``: its NYSE clock, a session's phases (open, the ``cls`` cutoff, close; early closes) and its bars.

The loop wired to it and the chaos harness stay in ``marketcast.trade.test_kit``. No product room imports
either (a forbidden contract in pyproject.toml).
"""
