"""Compile settings, read once from the environment and ``.env.compile`` (the environment wins).

``.env.compile`` holds shell lines (``export KEY=VALUE`` or ``KEY=VALUE``, ``#`` comments) so a user can also
``source`` it; it is parsed by :func:`marketcast.settings.read_env_file`, as every command reads it. Every value
records where it came from: ``env``, ``file`` or ``default``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from marketcast.errors import ConfigError
from marketcast.settings import ENV_FILE, parse_bool, read_env_file  # the one parser of .env.compile

MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
KEYS = (
    "TOTO_DISABLE_COMPILE",
    "TOTO_COMPILE",
    "TOTO_COMPILE_MODE",
    "TOTO_COMPILE_BACKEND",
    "KRONOS_COMPILE",
    "KRONOS_COMPILE_MODE",
    "TORCHDYNAMO_RECOMPILE_LIMIT",
    "MARKETCAST_COMPILE_CACHE_DIR",
)


def parse_mode(key: str, value: str, origin: str) -> str:
    if value not in MODES:
        raise ConfigError(f"{key}={value!r} ({origin}) is not a compile mode; use one of {', '.join(MODES)}")
    return value


@dataclass(frozen=True)
class CompileSettings:
    """Effective settings. ``toto_compile``/``kronos_compile`` None means auto: compile on CUDA only."""

    toto_compile: bool | None = None
    toto_mode: str = "reduce-overhead"  # CUDA graphs; runs as "default" on CPU (see mode_for)
    toto_backend: str = "inductor"
    kronos_compile: bool | None = None
    kronos_mode: str = "reduce-overhead"
    recompile_limit: int | None = None
    cache_dir: Path = field(default_factory=lambda: Path.home() / ".cache" / "marketcast" / "compile")
    sources: Mapping[str, str] = field(default_factory=dict)

    def mode_for(self, model: str, device: str) -> str | None:
        """The torch.compile mode to use for ``model`` on ``device``, or None for eager."""
        enabled, mode = {
            "toto": (self.toto_compile, self.toto_mode),
            "kronos": (self.kronos_compile, self.kronos_mode),
        }.get(model, (False, "default"))
        if enabled is None:
            enabled = str(device).startswith("cuda")
        if not enabled:
            return None
        if not str(device).startswith("cuda") and mode == "reduce-overhead":
            return "default"  # CUDA graphs need CUDA; inductor on CPU ignores them anyway
        return mode


DEFAULT_DESCRIPTIONS = {
    "TOTO_DISABLE_COMPILE": "unset (auto: compile on CUDA only)",
    "TOTO_COMPILE": "unset (auto: compile on CUDA only)",
    "TOTO_COMPILE_MODE": "reduce-overhead",
    "TOTO_COMPILE_BACKEND": "inductor",
    "KRONOS_COMPILE": "unset (auto: compile on CUDA only)",
    "KRONOS_COMPILE_MODE": "reduce-overhead",
    "TORCHDYNAMO_RECOMPILE_LIMIT": "unset (torch default, 8)",
    "MARKETCAST_COMPILE_CACHE_DIR": "~/.cache/marketcast/compile",
}


@dataclass(frozen=True)
class SettingSource:
    """One key as ``status`` shows it: the value in effect, where it came from, and a shadowed file value."""

    key: str
    value: str
    source: str  # "env" | "file" | "default"
    shadowed_file_value: str | None = None  # set when the environment overrides a different file value


def describe_sources(env: Mapping[str, str] | None = None, path: str | Path = ENV_FILE) -> list[SettingSource]:
    """Per raw key: effective value and origin (env > file > default), without validating values.

    Kept separate from :func:`load_settings` so ``status`` can still show where a bad value came from.
    """
    env = os.environ if env is None else env
    file_values = read_env_file(path)
    rows = []
    for key in KEYS:
        in_file = file_values.get(key)
        if key in env and env[key] != "":
            shadow = in_file if in_file is not None and in_file != env[key] else None
            rows.append(SettingSource(key, env[key], "env", shadow))
        elif in_file is not None:
            rows.append(SettingSource(key, in_file, "file"))
        else:
            rows.append(SettingSource(key, DEFAULT_DESCRIPTIONS[key], "default"))
    return rows


def load_settings(env: Mapping[str, str] | None = None, path: str | Path = ENV_FILE) -> CompileSettings:
    """Merge defaults < ``.env.compile`` < environment; bad values raise :class:`ConfigError`.

    Toto's switch has two spellings: ``TOTO_DISABLE_COMPILE=1`` always wins (the safe side); with
    ``TOTO_DISABLE_COMPILE=0`` an explicit ``TOTO_COMPILE`` decides, else compile is on.
    """
    env = os.environ if env is None else env
    file_values = read_env_file(path)
    raw: dict[str, tuple[str, str]] = {}
    for key in KEYS:
        if key in env and env[key] != "":
            raw[key] = (env[key], "env")
        elif key in file_values:
            raw[key] = (file_values[key], "file")

    def origin(key: str) -> str:
        return "environment" if raw[key][1] == "env" else f"{path}"

    kwargs: dict = {}
    sources: dict[str, str] = {}
    toto = None
    if "TOTO_COMPILE" in raw:
        toto = parse_bool("TOTO_COMPILE", raw["TOTO_COMPILE"][0], origin("TOTO_COMPILE"))
        sources["toto_compile"] = raw["TOTO_COMPILE"][1]
    if "TOTO_DISABLE_COMPILE" in raw:
        disabled = parse_bool("TOTO_DISABLE_COMPILE", raw["TOTO_DISABLE_COMPILE"][0], origin("TOTO_DISABLE_COMPILE"))
        if disabled or toto is None:
            toto = not disabled
            sources["toto_compile"] = raw["TOTO_DISABLE_COMPILE"][1]
    kwargs["toto_compile"] = toto
    if "KRONOS_COMPILE" in raw:
        kwargs["kronos_compile"] = parse_bool("KRONOS_COMPILE", raw["KRONOS_COMPILE"][0], origin("KRONOS_COMPILE"))
        sources["kronos_compile"] = raw["KRONOS_COMPILE"][1]
    for key, attr in (("TOTO_COMPILE_MODE", "toto_mode"), ("KRONOS_COMPILE_MODE", "kronos_mode")):
        if key in raw:
            kwargs[attr] = parse_mode(key, raw[key][0], origin(key))
            sources[attr] = raw[key][1]
    if "TOTO_COMPILE_BACKEND" in raw:
        backend = raw["TOTO_COMPILE_BACKEND"][0]
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", backend):
            raise ConfigError(f"TOTO_COMPILE_BACKEND={backend!r} ({origin('TOTO_COMPILE_BACKEND')}) is not a backend name")
        kwargs["toto_backend"] = backend
        sources["toto_backend"] = raw["TOTO_COMPILE_BACKEND"][1]
    if "TORCHDYNAMO_RECOMPILE_LIMIT" in raw:
        value = raw["TORCHDYNAMO_RECOMPILE_LIMIT"][0]
        if not value.isdigit() or int(value) < 1:
            raise ConfigError(
                f"TORCHDYNAMO_RECOMPILE_LIMIT={value!r} ({origin('TORCHDYNAMO_RECOMPILE_LIMIT')}) must be a positive integer"
            )
        kwargs["recompile_limit"] = int(value)
        sources["recompile_limit"] = raw["TORCHDYNAMO_RECOMPILE_LIMIT"][1]
    if "MARKETCAST_COMPILE_CACHE_DIR" in raw:
        kwargs["cache_dir"] = Path(raw["MARKETCAST_COMPILE_CACHE_DIR"][0]).expanduser()
        sources["cache_dir"] = raw["MARKETCAST_COMPILE_CACHE_DIR"][1]
    return CompileSettings(**kwargs, sources=sources)
