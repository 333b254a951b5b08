"""One option, one declaration: a command taking a shared concept (--windows, --model, --seed, --data-dir, ...)
takes the very declaration of ``commands/options.py`` (or ``flags.py``), so its help, bounds and callback are
the same everywhere; ``models compare --windows all`` used to be refused because it declared its own."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import typing

import marketcast.commands as commands
from marketcast.commands import flags, options, main

# second declarations kept on purpose, each with its reason
DIFFERENT = {
    ("forecast", "--windows"): "the windows --calibration scores (default 250), not a backtest's",
    ("forecast", "--start"): "the first decision date --calibration scores",
    ("forecast", "--end"): "the fan's last bar, or the last decision date --calibration scores",
    ("compare", "--weights"): "one model's weights among several: MODEL=WEIGHTS, repeatable",
    ("compare", "--windows"): "one count for every symbol and model: no --start/--end to be an alternative to",
    ("finetune", "--model"): "only the models that can be tuned (toto, toto2, kronos)",
    ("finetune", "--seed"): "the seed of the batch order and the adapters' init, not of forecast samples",
    ("finetune", "--samples"): "--evaluate's sample paths only",
    ("trade", "--start"): "a replay's first day (alias --from), required",
    ("trade", "--end"): "a replay's last day settled (alias --to), required",
    ("trade", "--hold"): "what the replay trades (LoopConfig.hold_agreeing; its paper broker holds as Alpaca does "
                         "either way) where the backtest's --hold scores it: one setting, a help for each side",
}


def _info(annotation):
    """The typer OptionInfo of an ``Annotated[..., typer.Option(...)]`` annotation (None otherwise)."""
    if typing.get_origin(annotation) is typing.Annotated:
        return next((m for m in typing.get_args(annotation)[1:] if type(m).__name__ == "OptionInfo"), None)
    return None


def _flags(info) -> set[str]:
    """The option's --names (inside Annotated, typer reads a first positional "--name" as a declaration; a
    boolean "--name/--no-name" declares both)."""
    first = (info.default,) if isinstance(info.default, str) else ()
    return {part for d in (*first, *(info.param_decls or ())) for part in d.split("/") if part.startswith("--")}


def shared() -> dict[str, object]:
    """--flag -> the shared OptionInfo declaring it."""
    found = {}
    for module in (options, flags):
        for value in vars(module).values():
            info = _info(value)
            if info is not None:
                found.update(dict.fromkeys(_flags(info), info))
    return found


def _annotations(fn, module) -> list:
    """``fn``'s parameter annotations, evaluated one by one (a helper's ``pd.DataFrame`` under TYPE_CHECKING
    stays a name: it is no option)."""
    out = []
    for parameter in inspect.signature(fn).parameters.values():
        try:
            out.append(eval(parameter.annotation, vars(module)) if isinstance(parameter.annotation, str)
                       else parameter.annotation)
        except NameError:
            continue
    return out


def declarations():
    """(module, function, --flag, OptionInfo) of every option of every command function."""
    for mod in pkgutil.iter_modules(commands.__path__):
        module = importlib.import_module(f"marketcast.commands.{mod.name}")
        for name, fn in vars(module).items():
            if not inspect.isfunction(fn) or fn.__module__ != module.__name__:
                continue
            for annotation in _annotations(fn, module):
                info = _info(annotation)
                for flag in (_flags(info) if info is not None else ()):
                    yield mod.name, name, flag, info


def test_every_shared_option_is_declared_once():
    common = shared()
    assert {"--windows", "--model", "--seed", "--data-dir", "--timezone", "--json"} <= set(common)
    again = sorted((module, flag) for module, _, flag, info in declarations()
                   if flag in common and info is not common[flag] and (module, flag) not in DIFFERENT)
    assert again == [], f"declare these with commands/options.py's shared option: {again}"
    seen = {(module, flag) for module, _, flag, _ in declarations()}
    assert set(DIFFERENT) <= seen  # an exception that no longer exists is dropped from the list


def test_models_compare_takes_windows_all(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MARKETCAST_RUN_STORE", str(tmp_path / "runs"))
    data = tmp_path / "data"
    data.mkdir()
    from marketcast.data import load_symbol

    load_symbol("SP500").frame.iloc[:40].to_csv(data / "SP500.csv")
    load_symbol("NASDAQ").frame.iloc[:50].to_csv(data / "NASDAQ.csv")
    assert main(["models", "compare", "--models", "baseline", "--symbols", "SP500,NASDAQ", "--data-dir", str(data),
                 "--windows", "all", "--samples", "16", "--json"]) == 0
    import json

    # every window the shorter history allows: 40 bars, the first window needs 3 and a bar to settle on
    assert json.loads(capsys.readouterr().out)["windows"] == 40 - 3
