"""``enable`` / ``disable`` / ``mode``: what each writes into ``.env.compile``.

Toto's switch has two spellings (``TOTO_DISABLE_COMPILE`` from the original system, ``TOTO_COMPILE``), so
both are always written together and can never disagree: enable = ``TOTO_COMPILE=1`` +
``TOTO_DISABLE_COMPILE=0``, disable = ``TOTO_COMPILE=0`` + ``TOTO_DISABLE_COMPILE=1``. Kronos has one switch,
``KRONOS_COMPILE``. Modes go to ``TOTO_COMPILE_MODE`` / ``KRONOS_COMPILE_MODE`` after validation.
"""

from __future__ import annotations

from pathlib import Path

from marketcast.compile.envfile import update_env_file
from marketcast.runtime.compile_settings import MODES
from marketcast.errors import ConfigError

TOGGLE_MODELS = ("toto", "kronos", "all")


def _models(model: str) -> tuple[str, ...]:
    if model not in TOGGLE_MODELS:
        raise ConfigError(f"unknown model {model!r}; choose one of {', '.join(TOGGLE_MODELS)}")
    return ("toto", "kronos") if model == "all" else (model,)


def switch_updates(model: str, enabled: bool) -> dict[str, str]:
    """The key/value pairs that turn compile on or off for ``model`` (toto, kronos or all)."""
    updates: dict[str, str] = {}
    for name in _models(model):
        if name == "toto":
            updates["TOTO_COMPILE"] = "1" if enabled else "0"
            updates["TOTO_DISABLE_COMPILE"] = "0" if enabled else "1"
        else:
            updates["KRONOS_COMPILE"] = "1" if enabled else "0"
    return updates


def mode_updates(model: str, mode: str) -> dict[str, str]:
    """The key/value pairs that select ``mode`` for ``model``; an unknown mode is a ConfigError."""
    if mode not in MODES:
        raise ConfigError(f"unknown compile mode {mode!r}; use one of {', '.join(MODES)}")
    return {f"{name.upper()}_COMPILE_MODE": mode for name in _models(model)}


def set_enabled(path: str | Path, model: str, enabled: bool) -> dict[str, str]:
    updates = switch_updates(model, enabled)
    update_env_file(path, updates)
    return updates


def set_mode(path: str | Path, model: str, mode: str) -> dict[str, str]:
    updates = mode_updates(model, mode)
    update_env_file(path, updates)
    return updates
