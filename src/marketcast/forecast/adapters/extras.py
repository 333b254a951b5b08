"""Import an optional extra's package, or say in one line which extra installs it."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from marketcast.errors import ConfigError, first_line

# pip distribution that provides each importable top-level package, for the message.
_DISTRIBUTIONS = {"chronos": "chronos-forecasting", "timesfm": "timesfm", "tirex": "tirex-ts"}


def missing_message(module: str, extra: str, model: str) -> str:
    """The one line a missing extra gets."""
    top = module.split(".")[0]
    return (f"--model {model} needs the optional package {_DISTRIBUTIONS.get(top, top)}: "
            f"pip install 'marketcast[{extra}]'")


def installed(module: str) -> bool:
    """Whether ``module``'s top-level package can be found, without importing it (cheap enough for --help)."""
    try:
        return importlib.util.find_spec(module.split(".")[0]) is not None
    except (ImportError, ValueError):  # a None or spec-less entry in sys.modules
        return False


def require(module: str, extra: str, model: str) -> ModuleType:
    """Import ``module`` (e.g. ``"chronos"``) and return it; when it is missing raise a :class:`ConfigError`
    (exit 2) naming the extra: ``--model chronos2 needs the optional package chronos-forecasting: pip install
    'marketcast[chronos]'``. A package that is installed but fails to import (one of its own dependencies is
    missing or broken) says so instead, with the library's first line: "install the extra" would not be news."""
    top = module.split(".")[0]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = getattr(exc, "name", None)
        if missing is None or missing == top or module == missing or module.startswith(missing + "."):
            raise ConfigError(missing_message(module, extra, model)) from exc
        raise ConfigError(
            f"--model {model}: the optional package {_DISTRIBUTIONS.get(top, top)} is installed but does not import "
            f"({first_line(exc)}); reinstall it: pip install --force-reinstall 'marketcast[{extra}]'"
        ) from exc
