"""A Typer group whose subcommands are imported only when one of them runs.

``marketcast --help`` lists every subcommand from a table of import paths and one-line summaries and imports
none of them; ``marketcast backtest ...`` imports the backtest's CLI and nothing else (not the trading loop,
not torch). pip, Flask and the AWS CLI keep their start-up fast the same way.

The cyclic garbage collector is off while a command imports (:func:`imports_untraced`): numpy, pandas and
pyarrow make a few hundred thousand objects that live as long as the process, and each collection during the
import, and every full one after it, walked them again (50-70 ms of CPU in the default backtest, more than
pandas' own import pays for its collections).
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from importlib import import_module
from typing import Any

import typer
from typer.core import TyperCommand

from marketcast.commands.help import HelpCommand, HelpGroup, adopt
from marketcast.signals import shielded

# name -> ("package.module:attribute", summary); the attribute is a Typer app (a group of subcommands) or a
# function (one command)
CommandTable = dict[str, tuple[str, str]]

_frozen = False  # gc.freeze() once per process: in-process callers (the tests) load commands many times


@contextmanager
def imports_untraced():
    """The block's imports without the cyclic garbage collector, and what the process holds then moved out of
    its reach (``gc.freeze``: modules, classes and functions are never garbage). Frozen once per process: a
    later freeze would also keep forever any cyclic garbage made between the two (a test session calling
    ``main`` again and again); a later block only pauses the collector."""
    global _frozen
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if not _frozen:
            gc.freeze()
            _frozen = True
        if enabled:
            gc.enable()


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
        with shielded(), imports_untraced():  # a signal waits for the imports: an extension stopped half-way
            loaded = import_module(module)  # through its init can crash the interpreter (SIGSEGV under SIGTERM)
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
