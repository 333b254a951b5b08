"""A Typer group whose subcommands are imported only when one of them runs.

``marketcast --help`` lists every subcommand from a table of import paths and one-line summaries and imports
none of them; ``marketcast backtest ...`` imports the backtest's CLI and nothing else (not the trading loop,
not torch). pip, Flask and the AWS CLI keep their start-up fast the same way.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

import typer
from typer.core import TyperCommand

from marketcast.commands.help import HelpCommand, HelpGroup, adopt
from marketcast.signals import shielded

# name -> ("package.module:attribute", summary); the attribute is a Typer app (a group of subcommands) or a
# function (one command)
CommandTable = dict[str, tuple[str, str]]


class LazyGroup(HelpGroup):
    """Lists :attr:`table`'s commands by their summaries; imports a command when it is resolved to run."""

    table: CommandTable = {}

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for name, (_, summary) in self.table.items():
            self.commands[name] = TyperCommand(name, help=summary)  # what a listing shows

    def resolve_command(self, ctx, args):
        name, command, rest = super().resolve_command(ctx, args)  # unknown names fail here, with suggestions
        return name, (None if command is None else self.load(name)), rest

    def load(self, name: str):
        """The real command ``name``: imported, and turned into a click command by Typer."""
        path, summary = self.table[name]
        module, attribute = path.split(":")
        with shielded():  # a signal waits for the imports: an extension stopped half-way through its init can
            loaded = import_module(module)  # crash the interpreter (SIGSEGV seen under SIGTERM at random moments)
        target = getattr(loaded, attribute)
        if isinstance(target, typer.Typer):
            command = typer.main.get_group(adopt(target))
            command.help = command.help or summary
        else:
            single = typer.Typer(add_completion=False)
            single.command(name, cls=HelpCommand)(target)
            command = typer.main.get_command(single)
        command.name = name
        return command


def lazy_group(table: CommandTable) -> type[LazyGroup]:
    """A :class:`LazyGroup` class over ``table``, for ``typer.Typer(cls=...)``."""
    return type("LazyCommands", (LazyGroup,), {"table": table})
