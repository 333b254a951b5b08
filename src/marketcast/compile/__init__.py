"""The compile toolkit, built on top of the models: stress check with its per-symbol study, recompile-log
analyzer, backtest compare, report, ``.env.compile`` toggles, start probe and the ``marketcast compile`` CLI.

What the models themselves import to compile (settings, guarded steps, cache, counters) is
:mod:`marketcast.runtime`; nothing there imports this package. Importing this package imports no torch.
"""
