"""Sweeps: a TOML grid of backtest cells run on Ray (local or a cluster), recorded in the run store."""
