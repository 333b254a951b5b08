"""Shared rich consoles: tables and progress on stdout, errors and warnings on stderr."""

from rich.console import Console

console = Console()
err_console = Console(stderr=True)
