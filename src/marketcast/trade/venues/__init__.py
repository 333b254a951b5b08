"""The venues, the only code that talks to a broker: ``paper`` (embedded SQLite broker, fills by the backtest's
rule) and ``alpaca`` (alpaca-py, with ``alpaca_data`` and ``endpoints``). Only the wiring builds one."""
