"""Option values that need no converting are taken as they come, without pydantic.

Typer 0.29 converts every option's value through a pydantic ``TypeAdapter`` it builds on first use, even a
``None`` or a default already of the option's type: a default backtest imported pydantic and built 50 adapters
for its 55 options, about 0.08 s of a 0.9 s command. :class:`QuickCoercion` answers the values whose result
is plain (``None``, a default of the option's own type, text for a ``str`` option, digits for an ``int``, a
finite decimal for a ``float``, a path, a list of text) exactly as typer's adapter would, range checks included;
any other value, and every value that does not pass, goes to typer's own coercion, so every conversion and
every error message stays typer's (``tests/spine/test_coercion.py`` holds the two to the same answers). A
typer without this machinery (before 0.29) is left as it is.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, get_args, get_origin

try:  # typer >= 0.29: values are coerced by a RuntimeParam per parameter, built on first use
    from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
    from typer._param_types import coerce_cli_path, lenient_issubclass, routes_to_path
except ImportError:  # an older typer converts through click's types: nothing to do
    RuntimeParam = None

_UNSURE = object()  # the quick path does not answer: typer's adapter does
_INT = re.compile(r"-?[0-9]+")
_FLOAT = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def _in_range(number, info) -> Any:
    low_ok = info.min is None or number >= info.min
    high_ok = info.max is None or number <= info.max
    return number if low_ok and high_ok else _UNSURE  # out of range: typer says so in its words


def _number(annotation, value, info) -> Any:
    if info.clamp:
        return _UNSURE
    if annotation is int:
        if type(value) is int:
            return _in_range(value, info)
        if type(value) is str and _INT.fullmatch(value):
            return _in_range(int(value), info)
    if annotation is float:
        if type(value) is float and math.isfinite(value):
            return _in_range(value, info)
        if type(value) is str and _FLOAT.fullmatch(value) and math.isfinite(float(value)):
            return _in_range(float(value), info)
    return _UNSURE


def finite(value: Any) -> Any:
    """``value`` unless it is a float that is not finite: ``inf``, ``nan`` and ``1e999`` pass typer's
    conversion and every ``min=`` bound (``trade replay --cash inf`` ran, with a numpy warning). No option of
    marketcast means infinity; each one that takes a number refuses them here, in one line."""
    if isinstance(value, float) and not math.isfinite(value):
        import typer

        raise typer.BadParameter(f"{value} is not a finite number.")
    return value


def _path(annotation, value, info, param, ctx) -> Any:
    path_type = info.path_type
    if path_type is None and lenient_issubclass(annotation, Path):
        path_type = annotation
    if path_type is not Path or not isinstance(value, (str, PurePath)):
        return _UNSURE
    try:  # pydantic reads a str as Path(value); the checks (exists, resolve, ...) are typer's own function
        return coerce_cli_path(Path(value), info, path_type=Path, param=param, ctx=ctx)
    except Exception:  # noqa: BLE001 - a path typer refuses: its adapter says why, in its words
        return _UNSURE


def quick_value(annotation, info, value, param=None, ctx=None) -> Any:
    """The value typer's adapter would return for ``value``, when that is plain; else :data:`_UNSURE`."""
    if info.parser is not None:
        return _UNSURE
    if get_origin(annotation) is list and get_args(annotation) == (str,):
        if isinstance(value, (list, tuple)) and all(type(v) is str for v in value):
            return list(value)
        return _UNSURE
    if annotation is str:
        return value if type(value) is str else _UNSURE
    if annotation in (int, float):
        return _number(annotation, value, info)
    if routes_to_path(annotation, info):
        return _path(annotation, value, info, param, ctx)
    return _UNSURE


if RuntimeParam is not None:

    @dataclass(frozen=True)
    class QuickCoercion(RuntimeParam):
        """:func:`quick_value`, else typer's own coercion (built then, once)."""

        descriptor: TypeDescriptor

        def _coerce_value(self, value: Any, param, ctx) -> Any:
            quick = quick_value(self.annotation, self.parameter_info, value, param, ctx)
            if quick is not _UNSURE:
                return quick
            if self.annotation is float and type(value) is str:  # nan is no number, before any range: `--fee nan`
                try:  # said "nan is not a finite number", not "Input should be less than or equal to 0.5"
                    finite(float(value))
                except ValueError:
                    pass  # not a number at all: typer says so
            typers = self.__dict__.get("_typers")
            if typers is None:  # built once, kept here: the finite check below must see every later value too
                typers = build_runtime_param(self.descriptor)
                object.__setattr__(self, "_typers", typers)
            return finite(typers._coerce_value(value, param=param, ctx=ctx))


def install(params) -> None:
    """Give each typer parameter of ``params`` whose coercion is not built yet a :class:`QuickCoercion` (a
    file option keeps typer's: it opens the file)."""
    if RuntimeParam is None:
        return
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or getattr(param, "_runtime_param", 0) is not None or descriptor.is_file:
            continue
        param._runtime_param = QuickCoercion(parameter_info=descriptor.parameter_info,
                                             annotation=descriptor.annotation, descriptor=descriptor)
