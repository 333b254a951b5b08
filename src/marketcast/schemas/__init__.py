"""The JSON Schemas of every ``--json`` output, shipped inside the package (a wheel carries them as package data),
so whoever installs marketcast can validate what it prints: ``marketcast schema NAME`` prints one.

Each schema's ``$id`` is ``urn:marketcast:schema:NAME`` and a schema refers to another by that id
(``urn:marketcast:schema:backtest#/$defs/verdict``); :func:`registry` resolves every id to its packaged file.
These files are the one source: docs/schemas/README.md points here."""

from __future__ import annotations

import json
from importlib.resources import files

from marketcast.errors import ConfigError

SUFFIX = ".schema.json"
ID_PREFIX = "urn:marketcast:schema:"


def names() -> list[str]:
    """Every packaged schema's name (``backtest``, ``models_compare``, ...), sorted."""
    return sorted(p.name.removesuffix(SUFFIX) for p in files(__name__).iterdir() if p.name.endswith(SUFFIX))


def text(name: str) -> str:
    """The schema ``name`` as its file holds it; an unknown name is one line (exit 2) listing the known ones."""
    if name not in names():
        raise ConfigError(f"unknown schema {name!r}; choose one of {', '.join(names())} "
                          "(`marketcast schema` lists them)")
    return files(__name__).joinpath(name + SUFFIX).read_text(encoding="utf-8")


def load(name: str) -> dict:
    """The schema ``name`` as a dict."""
    return json.loads(text(name))


def schema_id(name: str) -> str:
    """The ``$id`` of schema ``name``: how another schema (or a consumer's registry) refers to it."""
    return ID_PREFIX + name


def registry():
    """A :class:`referencing.Registry` holding every packaged schema under its ``$id``, for a validator to
    follow ``$ref`` s across schemas (``Draft202012Validator(load(name), registry=registry())``)."""
    from referencing import Registry, Resource

    return Registry().with_resources((schema_id(n), Resource.from_contents(load(n))) for n in names())
