"""User-facing errors: the CLI prints one line and exits with code 2 for any of these."""


class MarketcastError(Exception):
    """Bad input or configuration the user can fix; the message says what, where and how."""

    exit_code = 2


class DataError(MarketcastError):
    """A bars file or dataset that cannot be used as given."""


class ConfigError(MarketcastError):
    """A setting, flag or environment variable with a value we cannot accept."""


class ModelLoadError(MarketcastError):
    """Weights or a config that cannot be found or do not fit the model."""
