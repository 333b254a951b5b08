"""``marketcast schema [NAME]``: the JSON Schema of a ``--json`` output, from the installed package
(:mod:`marketcast.schemas`), so what a command prints can be validated wherever marketcast is installed."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer


def schema(
    name: Annotated[Optional[str], typer.Argument(
        help="The schema to print, e.g. backtest or models_compare (none: list them with their $id).")] = None,
) -> None:
    """Print the JSON Schema of a --json output (no NAME: list every schema and its $id)."""
    from marketcast.schemas import names, schema_id, text

    if name is None:
        width = max(map(len, names())) + 2
        sys.stdout.write("".join(f"{n:<{width}}{schema_id(n)}\n" for n in names()))
        return
    sys.stdout.write(text(name).rstrip("\n") + "\n")
