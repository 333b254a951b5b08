"""Compile toolkit: settings, guarded runtime, stress harness, recompile analyzer, persistent cache.

Import the submodules directly (``marketcast.compile.runtime``, ``.settings``); this package stays light so
``marketcast --help`` and the data commands never pay for importing torch.
"""
