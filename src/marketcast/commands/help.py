"""How ``--help`` reads, for every command: the one place that says how an option's type, range and default
print, and how the page fits the terminal.

Typer's own page prints types as ``<bool>`` or ``<int range>``, unbounded ranges as
``[0<=x<=9223372036854775807]``, and squeezes six columns into 80, cutting long option names and words. This
page is laid out as click and most tools lay theirs out: ``-n, --windows INTEGER`` on the left, the help
word-wrapped on the right (under it when the left side is long), ``-h`` as well as ``--help``; a long page's
options in panels (:mod:`marketcast.commands.panels`), the common ones first.
"""

from __future__ import annotations

import inspect
import io
import re
import shutil
import sys
from enum import Enum
from pathlib import Path
from typing import Any, Sequence, get_args, get_origin

import typer
from rich.console import Console
from rich.errors import MarkupError
from rich.text import Text
from typer.core import TyperCommand, TyperGroup

from marketcast.commands import coercion
from marketcast.commands.panels import grouped

HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}
MAX_WIDTH = 100  # a wider terminal still gets lines a reader can follow
LEFT_MAX = 28  # an option's name and type longer than this puts its help on the next line
INDENT = 2
_NAMES = {int: "INTEGER", float: "FLOAT", str: "TEXT", Path: "PATH"}


def choice_list(choices: Sequence[Any]) -> str:
    """``[a|b|c]``: how an option that takes one of a few words says so (also a metavar for options that check
    their choices in a callback)."""
    return f"[{'|'.join(str(c.value if isinstance(c, Enum) else c) for c in choices)}]"


def type_label(param) -> str | None:
    """What an option takes: INTEGER, FLOAT, TEXT, PATH or a choice list; None for a flag (it takes nothing)."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return None
    if param.metavar:
        return param.metavar
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None:  # a plain click parameter
        return param.type.name.upper()
    if descriptor.is_choice and descriptor.choices:
        return choice_list(descriptor.choices)
    if descriptor.is_path:
        return "PATH"
    annotation = descriptor.annotation
    if get_origin(annotation) in (list, tuple):
        annotation = get_args(annotation)[0]
    if descriptor.is_datetime:
        return "DATE"
    return _NAMES.get(annotation, getattr(annotation, "__name__", str(annotation)).upper())


def range_label(param) -> str | None:
    """``[1..10]`` for a range bounded on both sides; None for a lower (or upper) bound only, which the help
    text says in words when it matters (an upper bound of ``sys.maxsize`` is no bound)."""
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if high is not None and high >= sys.maxsize:
        high = None
    if low is None or high is None:
        return None
    return f"[{low:g}..{high:g}]"


def default_label(param, ctx) -> str | None:
    """The default as ``[default: ...]`` shows it, so every option says what happens without it: ``none`` for an
    option that is off unless given; None when there is nothing to add (a flag that is off, a required option,
    an option whose help says its default, or gives an example, in words)."""
    shown = getattr(param, "show_default", None)
    if isinstance(shown, str):
        return shown
    if shown is False or (shown is None and not ctx.show_default):
        return None
    value = param.default
    if callable(value):
        return "(dynamic)"
    if getattr(param, "is_flag", False):
        if param.secondary_opts:
            return (param.opts if value else param.secondary_opts)[-1]
        return "on" if value else None
    if param.required:
        return None
    if value is None or value == () or value == []:  # "none", unless the help says what it means
        return None if any(w in (param.help or "").lower() for w in ("default", "e.g.")) else "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    return str(value.value if isinstance(value, Enum) else value)


def _argument_name(param) -> str:
    """``SPEC``, ``SYMBOLS...``: an argument as the usage line and the Arguments list both name it."""
    return (param.metavar or param.name.upper()) + ("..." if param.nargs != 1 else "")


def _usage(command, ctx) -> str:
    """``marketcast sweep [OPTIONS] SPEC``: optional arguments in brackets, a group's ``COMMAND [ARGS]...``."""
    pieces = [ctx.command_path, command.options_metavar or ""]
    for param in command.get_params(ctx):
        if param.param_type_name == "argument":
            name, more = param.metavar or param.name.upper(), "..." if param.nargs != 1 else ""
            pieces.append(f"{name}{more}" if param.required else f"[{name}]{more}")
    pieces.append(getattr(command, "subcommand_metavar", None) or "")
    return " ".join(p for p in pieces if p)


def _option_name(param) -> Text:
    def names(opts: Sequence[str]) -> str:
        return ", ".join(sorted(opts, key=lambda o: o.startswith("--")))

    if param.param_type_name == "argument":
        return Text(_argument_name(param), style="bold cyan")
    text = Text(names(param.opts), style="bold cyan")
    if param.secondary_opts:
        text.append(" / ").append(names(param.secondary_opts), style="bold magenta")
    for extra in (type_label(param), range_label(param)):
        if extra:
            text.append(" ").append(extra, style="yellow")
    return text


def _markup(text: str) -> Text:
    """Help texts are rich markup (``\\[default: x]`` escaped); one that does not parse is shown as written."""
    try:
        return Text.from_markup(text)
    except MarkupError:
        return Text(text)


def _help_text(param, ctx) -> Text:
    text = _markup(" ".join((param.help or "").split())) if getattr(param, "help", None) else Text()
    default = default_label(param, ctx)
    extras = [f"[default: {default}]"] if default else []
    if param.required:
        extras.append("[required]")
    for extra in extras:
        text.append(" " if text.plain else "").append(extra, style="dim")
    return text


def _paragraphs(doc: str) -> list[str]:
    """A docstring's paragraphs, each on one line (a paragraph starting with ``\\b`` keeps its line breaks)."""
    doc = inspect.cleandoc(doc or "").partition("\f")[0]
    return [p.strip("\b\n") if p.startswith("\b") else " ".join(p.split()) for p in doc.split("\n\n") if p.strip()]


class _Page:
    """Lines of the help page, each wrapped between words to fit ``width``."""

    def __init__(self, width: int, color: bool) -> None:
        self.out = io.StringIO()
        self.console = Console(file=self.out, width=width, force_terminal=color, no_color=not color or None,
                               highlight=False, legacy_windows=False)
        self.width = width

    def line(self, text: Text | str = "") -> None:
        self.console.print(text, soft_wrap=True)

    def wrapped(self, text: Text, indent: int) -> list[Text]:
        lines = list(text.wrap(self.console, max(self.width - indent, 20), overflow="fold"))
        for piece in lines:
            piece.rstrip()
        return lines

    def paragraph(self, text: Text, indent: int = INDENT) -> None:
        for piece in self.wrapped(text, indent):
            self.line(Text(" " * indent) + piece)

    def rows(self, title: str, rows: list[tuple[Text, Text]]) -> None:
        """``title:`` then one row per (name, help): the help in a column after the longest name that fits
        :data:`LEFT_MAX`, or on the lines under a longer name."""
        if not rows:
            return
        self.line()
        self.line(Text(f"{title}:", style="bold"))
        column = INDENT + min(max(n.cell_len for n, _ in rows), LEFT_MAX) + 2
        if self.width - column < 30:
            column = INDENT + 4
        for name, help_text in rows:
            lines = self.wrapped(help_text, column) if help_text.plain else []
            if INDENT + name.cell_len + 2 > column:
                self.line(Text(" " * INDENT) + name)
                first = None
            else:
                first = Text(" " * INDENT) + name
                first.append(" " * (column - INDENT - name.cell_len))
            for i, piece in enumerate(lines):
                if i == 0 and first is not None:
                    self.line(first + piece)
                else:
                    self.line(Text(" " * column) + piece)
            if not lines and first is not None:
                first.rstrip()
                self.line(first)


def render(command, ctx) -> str:
    """``command``'s help page as text (ANSI-styled when stdout is a terminal)."""
    width = min(shutil.get_terminal_size().columns, MAX_WIDTH)
    color = ctx.color if ctx.color is not None else sys.stdout.isatty()
    page = _Page(width, color)
    page.paragraph(Text.assemble(("Usage: ", "yellow"), (_usage(command, ctx), "bold")), indent=0)
    for i, paragraph in enumerate(_paragraphs(command.help or "")):
        page.line()
        text = _markup(paragraph)
        if i:
            text.stylize("dim")
        page.paragraph(text)
    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    page.rows("Arguments", [(_option_name(p), _help_text(p, ctx)) for p in params if p.param_type_name == "argument"])
    for title, members in grouped([p for p in params if p.param_type_name == "option"]):
        page.rows(title, [(_option_name(p), _help_text(p, ctx)) for p in members])
    if hasattr(command, "list_commands"):  # a group
        rows = []
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                summary = sub.short_help or next(iter(_paragraphs(sub.help or "")), "")
                rows.append((Text(name, style="bold cyan"), _markup(summary)))
        page.rows("Commands", rows)
    if command.epilog:
        page.line()
        for paragraph in _paragraphs(command.epilog):
            page.paragraph(_markup(paragraph))
    return page.out.getvalue()


class HelpCommand(TyperCommand):
    """A command whose ``--help`` / ``-h`` is :func:`render`'s page (and whose plain option values skip
    pydantic: :mod:`marketcast.commands.coercion`)."""

    def format_help(self, ctx, formatter) -> None:
        formatter.write(render(self, ctx))

    def parse_args(self, ctx, args):
        coercion.install(self.get_params(ctx))
        return super().parse_args(ctx, args)


class HelpGroup(TyperGroup):
    """A group whose ``--help`` / ``-h`` is :func:`render`'s page (and whose plain option values skip
    pydantic: :mod:`marketcast.commands.coercion`)."""

    def format_help(self, ctx, formatter) -> None:
        formatter.write(render(self, ctx))

    def parse_args(self, ctx, args):
        coercion.install(self.get_params(ctx))
        return super().parse_args(ctx, args)


def adopt(app: typer.Typer) -> typer.Typer:
    """Give ``app`` (a room's Typer app) and its commands this help page and ``-h``; returns ``app``."""
    if not isinstance(app.info.cls, type):
        app.info.cls = HelpGroup
    if not isinstance(app.info.context_settings, dict):
        app.info.context_settings = dict(HELP_OPTIONS)
    for info in app.registered_commands:
        if info.cls in (None, TyperCommand):  # typer's own, not one a room chose
            info.cls = HelpCommand
        info.context_settings = info.context_settings or dict(HELP_OPTIONS)
    return app


def one_line(command, limit: int = 100) -> str:
    """A command's help in one line: its short help, else the first sentence of its first paragraph (markup
    read as the page shows it), cut before its first aside (``: ``, ``; `` or `` (``) when longer than
    ``limit``."""
    first = _markup(command.short_help or next(iter(_paragraphs(command.help or "")), "")).plain
    sentence = re.split(r"(?<!e\.g)(?<!i\.e)\.(?:\s|$)", first, maxsplit=1)[0].rstrip(".")
    if len(sentence) > limit:
        cuts = [m.start() for m in re.finditer(r": |; | \(", sentence) if m.start() >= 20]
        sentence = sentence[:cuts[0]] if cuts else sentence
    return sentence + "."


def command_tree() -> list[tuple[str, str]]:
    """``("marketcast runs list", one line of help)`` for every command and subcommand, in ``--help``'s order:
    the README's command list is made from this (:func:`command_block`), and tests/spine/test_readme.py compares
    the two."""
    from marketcast.commands import COMMANDS, app

    root = typer.main.get_command(app)
    ctx = typer.Context(root, info_name="marketcast")
    rows: list[tuple[str, str]] = []

    def walk(path: str, command) -> None:
        if hasattr(command, "list_commands"):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(f"{path} {name}", sub)
        else:
            rows.append((path, one_line(command)))

    for name in COMMANDS:
        walk(f"marketcast {name}", root.load(name))
    return rows


def command_block() -> str:
    """The README's command list: one line per command, its help after the longest command's name."""
    rows = command_tree()
    width = max(len(path) for path, _ in rows) + 2
    return "\n".join(f"{path:<{width}}{help_line}" for path, help_line in rows) + "\n"
