"""Layered settings: defaults < ``marketcast.toml`` < ``.env.compile`` < environment < flags, each value with
where it came from.

A command declares its settings once, as :class:`Setting`\\ s (key, default, parser, help, flag, environment
names). :func:`resolve` reads every layer and keeps, per key, the value in effect, the layer it came from and
the values of lower layers it overrides, so a command can print why each value is what it is
(``trade run --print-config``, like ``compile status``). :func:`with_options` turns the same declarations into
the command's options, with their defaults in ``--help``; :func:`given_flags` says which ones the user typed.

* ``marketcast.toml``: one table per command (``[trade]``, with sub-tables such as ``[trade.risk]``); a key
  the command does not know is an error (a typo never goes unnoticed); other commands' tables are ignored.
* ``.env.compile`` and the environment: ``MARKETCAST_<TABLE>_<KEY>`` (``MARKETCAST_TRADE_RISK_MAX_DAILY_LOSS``)
  and the aliases a setting names (``ADD_LATEST``, the seeds' name). ``.env.compile`` holds shell lines
  (``export KEY=VALUE``) so a user can also ``source`` it; :func:`read_env_file` is its one parser (the compile
  settings in :mod:`marketcast.runtime.compile_settings` use it too). An empty value counts as unset.
* A bad value is one :class:`~marketcast.errors.ConfigError` naming the key, the value and the layer it came
  from; only the value in effect is parsed, so a shadowed typo is shown, never fatal.
"""

from __future__ import annotations

import inspect
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from marketcast.errors import ConfigError
from marketcast.paths import input_file, read_text

CONFIG_FILE = "marketcast.toml"
ENV_FILE = ".env.compile"
TRUTHY = {"1", "true", "yes", "on"}
FALSY = {"0", "false", "no", "off"}
_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")

Parse = Callable[[Any], Any]
"""``parse(raw) -> value``: a raw value (a string from a flag or the environment, or TOML's own type) made
into the setting's value; raises ValueError with a short reason."""


# --- .env files ---------------------------------------------------------------------------------------------

def parse_bool(key: str, value: str, origin: str) -> bool:
    try:
        return boolean(value)
    except ValueError as exc:
        raise ConfigError(f"{key}={value!r} ({origin}) is {exc}") from None


def read_env_file(path: str | Path | None) -> dict[str, str]:
    """KEY -> raw value of every assignment in a ``.env``-style file (quotes stripped); {} if absent. Blank lines
    and ``#`` comments are skipped; any other line that is not ``KEY=VALUE`` is one ConfigError (exit 2) naming the
    file and the line."""
    if path is None or not Path(path).exists():
        return {}
    input_file(path, ConfigError, "a settings file of KEY=VALUE lines")  # a FIFO or /dev/zero: one line, no hang
    try:
        text = read_text(path)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror}); pass a settings file of KEY=VALUE lines") from None
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:  # a CSV or any other file given by mistake: refused, not read as "no settings"
            shown = line if len(line) <= 60 else line[:60] + "..."
            raise ConfigError(f"{path}: line {number} is not KEY=VALUE ({shown!r}); pass a settings file of "
                              "KEY=VALUE lines (# starts a comment)")
        value = m[2]
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        else:
            value = value.split(" #", 1)[0].strip()
        out[m[1]] = value
    return out


# --- parsers ------------------------------------------------------------------------------------------------

def boolean(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    v = str(raw).strip().lower()
    if v in TRUTHY:
        return True
    if v in FALSY:
        return False
    raise ValueError(f"not a boolean; use one of {sorted(TRUTHY)} or {sorted(FALSY)}")


def number(lo: float | None = None, hi: float | None = None, integer: bool = False) -> Parse:
    """A number (an integer with ``integer``) in [``lo``, ``hi``]."""

    def parse(raw: Any) -> float | int:
        if isinstance(raw, bool):
            raise ValueError("not a number")
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise ValueError("not a number") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("not a finite number")
        if integer:
            if not value.is_integer():
                raise ValueError("not a whole number")
            value = int(value)
        if lo is not None and value < lo:
            raise ValueError(f"less than {lo:g}")
        if hi is not None and value > hi:
            raise ValueError(f"more than {hi:g}")
        return value

    return parse


def choice(*options: str) -> Parse:
    def parse(raw: Any) -> str:
        value = str(raw).strip()
        if value not in options:
            raise ValueError(f"not one of {', '.join(options)}")
        return value

    return parse


def text(raw: Any) -> str:
    value = str(raw).strip()
    if not value or isinstance(raw, (dict, list)):
        raise ValueError("not a non-empty text")
    return value


def optional(parse: Parse) -> Parse:
    """``parse``, or None for a missing value (``""``, ``none``, ``auto``)."""

    def wrapped(raw: Any) -> Any:
        if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "none", "auto")):
            return None
        return parse(raw)

    return wrapped


def items(parse_item: Parse) -> Parse:
    """A tuple from a TOML array or ``"a,b,c"`` (blanks dropped); at least one item."""

    def parse(raw: Any) -> tuple:
        parts = raw if isinstance(raw, (list, tuple)) else str(raw).split(",")
        out = tuple(parse_item(p) for p in parts if str(p).strip())
        if not out:
            raise ValueError("empty; give at least one item")
        return out

    return parse


def pairs(parse_key: Parse, parse_value: Parse) -> Parse:
    """A dict from a TOML table, ``"A=x,B=y"`` or a list of ``"A=x"`` (a repeated flag)."""

    def parse(raw: Any) -> dict:
        if isinstance(raw, dict):
            entries = list(raw.items())
        else:
            entries = []
            for part in (raw if isinstance(raw, (list, tuple)) else str(raw).split(",")):
                if not str(part).strip():
                    continue
                key, sep, value = str(part).partition("=")
                if not sep:
                    raise ValueError(f"{part!r} is not KEY=VALUE")
                entries.append((key, value))
        return {parse_key(k): parse_value(v) for k, v in entries}

    return parse


# --- declarations -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Setting:
    """One setting: ``key`` is dotted (``risk.max_daily_loss``: table ``risk``, name ``max_daily_loss``)."""

    key: str
    default: Any
    parse: Parse
    help: str
    flag: str | None = None  # "--max-daily-loss"; a boolean's is "--x/--no-x"
    type: Any = str  # what the flag takes: str, float, int, bool or list[str] (repeatable)
    env: tuple[str, ...] = ()  # aliases after MARKETCAST_<TABLE>_<KEY>, e.g. ADD_LATEST
    shown: str | None = None  # the default as --help and --print-config say it, when str() is not it
    metavar: str | None = None  # what --help shows the flag takes
    bounds: tuple[float, float] | None = None  # a number's range, checked by click and shown by --help as [low..high]
    secret: Callable[[str], str] | None = None  # how a value that may be a credential is shown (errors, tables)

    @property
    def param(self) -> str:
        return self.key.replace(".", "__")

    def env_names(self, section: str) -> tuple[str, ...]:
        return (f"MARKETCAST_{section}_{self.key}".upper().replace(".", "_"), *self.env)

    def show(self, value: Any) -> str:
        if value == self.default and self.shown is not None:
            return self.shown
        return self.told(value)

    def told(self, value: Any) -> str:
        """``value`` as any line may say it: a secret setting's through its ``secret`` function, whatever the
        layer it came from and whether or not it parsed."""
        return show(value) if self.secret is None or value is None else self.secret(show(value))


def show(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "none"
    if isinstance(value, (tuple, list)):
        return ",".join(map(str, value))
    return "none" if value is None else f"{value:,.10g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class Value:
    """A setting as resolved: its value, the layer it came from (``default``, the config file's name,
    ``.env.compile``, ``environment``, ``flag``), exactly where, and the lower layers it overrides."""

    setting: Setting
    value: Any
    source: str
    origin: str
    shadowed: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return self.setting.key

    @property
    def shown(self) -> str:
        return self.setting.show(self.value)


@dataclass(frozen=True)
class Settings:
    """Every value of one command, by key (``settings["risk.max_daily_loss"]``), with where each came from."""

    values: dict[str, Value]
    files: tuple[str, ...]  # the files read, as "path" or "path (absent)"

    def __getitem__(self, key: str) -> Any:
        return self.values[key].value

    def rows(self) -> list[Value]:
        return list(self.values.values())


#: The deepest nesting of tables and arrays a config or sweep spec may have. Neither needs more than four
#: (``[trade.strategy]`` with a list value); Python's TOML reader recurses per level of arrays and inline tables and
#: overflows the stack past a few hundred, while dotted headers nest without limit and then overflow whatever walks
#: them: a limit checked without recursion makes both one line.
MAX_TOML_DEPTH = 32


def read_toml(path: str | Path, what: str) -> dict[str, Any]:
    """The TOML file ``path`` (``what`` names it in messages) as a dict; every problem is one
    :class:`ConfigError` line naming the file: not a regular file, not UTF-8, not TOML, or nested deeper than
    :data:`MAX_TOML_DEPTH` levels."""
    path = input_file(path, ConfigError, what)
    try:
        data = tomllib.loads(read_text(path))  # opened without blocking: a FIFO swapped in after the check
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save {what} as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix the file") from None
    except RecursionError:
        raise ConfigError(f"{path}: arrays or inline tables nested too deep to read; {what} needs at most "
                          f"{MAX_TOML_DEPTH} levels") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror}); check the path and its permissions") from None
    where = _too_deep(data)
    if where is not None:
        raise ConfigError(f"{path}: nested deeper than {MAX_TOML_DEPTH} levels at {where}; {what} needs at most "
                          f"{MAX_TOML_DEPTH} levels")
    return data


def _too_deep(data: dict) -> str | None:
    """The dotted key (cut to a readable length) of the first value deeper than :data:`MAX_TOML_DEPTH`, else
    None; walked with a stack, not recursion, so the check itself cannot overflow."""
    stack: list[tuple[Any, int, str]] = [(data, 0, "")]
    while stack:
        node, depth, key = stack.pop()
        if depth > MAX_TOML_DEPTH:
            return key if len(key) <= 60 else f"{key[:57]}..."
        if isinstance(node, dict):
            stack.extend((v, depth + 1, f"{key}.{k}" if key else str(k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, depth + 1, f"{key}[]") for v in node)
    return None


def read_config(path: Path | None, section: str, settings: Sequence[Setting]) -> dict[str, Any]:
    """``[section]`` of a TOML file as dotted key -> raw value ({} when ``path`` is None or absent)."""
    if path is None or not (path.exists() or path.is_symlink()):
        return {}
    data = read_toml(path, "a TOML config file")
    table = data.get(section, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: '{section}' must be a table, not a value")
    known = {s.key for s in settings}
    out: dict[str, Any] = {}

    def walk(node: dict, prefix: str) -> None:
        for name, raw in node.items():
            key = f"{prefix}{name}"
            if key in known:
                out[key] = raw
            elif isinstance(raw, dict) and any(k.startswith(f"{key}.") for k in known):
                walk(raw, f"{key}.")
            else:
                raise ConfigError(f"{path}: table {section}{'.' + prefix[:-1] if prefix else ''} has no setting "
                                  f"{name!r}; known: {', '.join(sorted(known))}")

    walk(table, "")
    return out


def resolve(settings: Sequence[Setting], section: str, *, config: Path | None = None,
            env_file: Path | None = None, env: Mapping[str, str] | None = None,
            flags: Mapping[str, Any] | None = None) -> Settings:
    """Every setting from defaults < ``config`` (its ``[section]``) < ``env_file`` < ``env`` < ``flags``
    (key -> value as typed)."""
    env, flags = env or {}, flags or {}
    from_file = read_config(config, section, settings)
    from_env_file = read_env_file(env_file)
    values = {}
    for s in settings:
        layers = [("default", "default", s.default)]
        if s.key in from_file:
            layers.append((config.name, f"{section}.{s.key} in {config}", from_file[s.key]))
        for source, found, place in ((Path(env_file or ENV_FILE).name, from_env_file, f" in {env_file}"),
                                     ("environment", env, "")):
            name = next((n for n in s.env_names(section) if found.get(n, "") != ""), None)
            if name is not None:
                layers.append((source, f"{name}{place}", found[name]))
        if s.key in flags:
            layers.append(("flag", s.flag or s.key, flags[s.key]))
        source, origin, raw = layers[-1]
        value = raw
        if source != "default":
            try:
                value = s.parse(raw)
            except ValueError as exc:
                raise ConfigError(f"{s.key} = {s.told(raw)!r} ({origin}) is {exc}") from None
        shadowed = tuple(f"{o} = {s.told(r)}" for src, o, r in layers[1:-1] if show(r) != show(raw))
        values[s.key] = Value(s, value, source, origin, shadowed)
    files = tuple(f"{p}{'' if p.exists() else ' (absent)'}" for p in (config, env_file) if p is not None)
    return Settings(values, files)


# --- the command line ---------------------------------------------------------------------------------------

def with_options(settings: Sequence[Setting]):
    """Decorate a typer command taking ``**flags``: each setting with a ``flag`` becomes a keyword-only option
    (default and help from the declaration), so ``--help`` lists them all with their defaults."""
    import typer

    def decorate(fn):
        signature = inspect.signature(fn)
        params = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        annotations = dict(fn.__annotations__)
        for s in settings:
            if s.flag is None:
                continue
            repeated = s.type == list[str]
            default = None if (repeated or s.default is None) else s.default
            shown = f" \\[default: {s.shown}]" if s.shown is not None else ""  # escaped: help is rich markup
            low, high = s.bounds or (None, None)
            option = typer.Option(default, *s.flag.split(" "), help=s.help + shown, show_default=s.shown is None,
                                  metavar=s.metavar, min=low, max=high)
            annotation = s.type if default is not None else s.type | None
            params.append(inspect.Parameter(s.param, inspect.Parameter.KEYWORD_ONLY, default=option,
                                            annotation=annotation))
            annotations[s.param] = annotation
        fn.__signature__ = signature.replace(parameters=params)
        fn.__annotations__ = annotations
        return fn

    return decorate


def given_flags(ctx, settings: Sequence[Setting], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """key -> value of the settings whose flag was on the command line (not click's default)."""
    out = {}
    for s in settings:
        if s.flag is None or s.param not in kwargs:
            continue
        source = ctx.get_parameter_source(s.param)
        if getattr(source, "name", "") == "COMMANDLINE" and kwargs[s.param] is not None:
            out[s.key] = kwargs[s.param]
    return out
