"""marketcast: probabilistic forecasts -> honest backtests -> trading decisions."""

__version__ = "0.1.0"
