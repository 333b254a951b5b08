"""A command function parses its options, calls one domain function and prints: none is over 60 lines.

The work a command starts lives in the room it belongs to (backtest, sweep, finetune, trade, ...), where it can
be called and tested without the command line; a long command function is work in the wrong room. Measured on
the source with ast: the whole ``def``, its signature included (long ``Annotated`` options belong at module
level or in :mod:`marketcast.commands.options`), its decorators not.
"""

from __future__ import annotations

import ast
import inspect
import sys
from importlib import import_module
from typing import Callable, Iterator

import typer

from marketcast.commands import COMMANDS

MAX_LINES = 60
EXPECTED = {  # every command the root table reaches, so the test cannot pass by finding none
    "backtest", "report", "sweep", "forecast", "finetune",
    "runs list", "runs show", "runs compare", "runs query", "runs compact",
    "data check", "data fetch", "models download", "models compare",
    "compile enable", "compile disable", "compile mode", "compile status", "compile check", "compile analyze",
    "compile compare",
    "trade run", "trade resume", "trade promote", "trade reconcile", "trade status", "trade orders", "trade replay",
    "schema",
}


def _registered(group: typer.Typer, path: str) -> Iterator[tuple[str, Callable]]:
    """A Typer group's commands by their command line, nested groups included."""
    for command in group.registered_commands:
        yield f"{path} {command.name or command.callback.__name__.replace('_', '-')}", command.callback
    for sub in group.registered_groups:
        yield from _registered(sub.typer_instance, f"{path} {sub.name or sub.typer_instance.info.name}")


def command_functions() -> dict[str, Callable]:
    """Every command function, by its command line (``trade replay``), imported from the root's table."""
    found: dict[str, Callable] = {}
    for name, (path, _) in COMMANDS.items():
        module, attribute = path.split(":")
        target = getattr(import_module(module), attribute)
        found.update(_registered(target, name) if isinstance(target, typer.Typer) else {name: target})
    return found


def def_lines(function: Callable) -> int:
    """Lines of ``function``'s ``def`` in its module's source: signature and body, not the decorators."""
    tree = ast.parse(inspect.getsource(sys.modules[function.__module__]))
    (node,) = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
               and n.name == function.__name__]
    return node.end_lineno - node.lineno + 1


def test_every_command_is_found():
    assert set(command_functions()) == EXPECTED


def test_no_command_function_is_over_60_lines():
    lengths = {name: def_lines(function) for name, function in command_functions().items()}
    offenders = {name: (f"{function.__module__}.{function.__name__}", lengths[name])
                 for name, function in command_functions().items() if lengths[name] > MAX_LINES}
    assert not offenders, (f"command functions over {MAX_LINES} lines (signature included; move the work into "
                           f"one domain function): {offenders}")
