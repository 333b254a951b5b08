"""The options a command without pandas shares (``runs list`` imports none): declared here, re-exported by
:mod:`marketcast.commands.options`, whose other options import the data layer."""

from __future__ import annotations

from typing import Annotated

import typer

AsJson = Annotated[bool, typer.Option(
    "--json", help="Print one JSON document on stdout instead of tables (its schema: marketcast schema).")]
