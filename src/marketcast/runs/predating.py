"""Settings a run may have been recorded without, because it predates them, and the value they had then.

Every backtest exited at the close before ``--exit`` existed, and ``next-open`` is the default now
(:data:`marketcast.backtest.execution.DEFAULT_EXIT`). The store's views read a missing value as this
(:mod:`marketcast.runs.read`), a decoded record's config does too (:mod:`marketcast.runs.codec`), and a cell id
leaves such a value out (:mod:`marketcast.runs.cells`), so an old run and a ``--exit close`` run are the same
setting and the same cells, and an old run and a default one are "settings differ".
"""

PREDATING = {"exit": "close", "hold": False, "equity": None}  # each: the value every run had before it
