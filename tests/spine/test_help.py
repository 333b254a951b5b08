"""``--help`` and ``-h`` of every command and group, as a reader at an 80-column terminal sees them."""

from __future__ import annotations

import re

import pytest
import typer
from rich.text import Text
from typer.testing import CliRunner

from marketcast.commands import COMMANDS, app, main
from marketcast.forecast.registry import MODEL_NAMES
from marketcast.commands.help import HELP_OPTIONS, HelpCommand, choice_list

WIDTH = 80


def _tree() -> list[tuple[list[str], object]]:
    """Every command path (the root, each group, each command), with its click command; lazily loaded ones
    are loaded as running them would."""
    root = typer.main.get_command(app)
    found: list[tuple[list[str], object]] = [([], root)]

    def walk(path: list[str], command) -> None:
        found.append((path, command))
        for name, sub in getattr(command, "commands", {}).items():
            walk([*path, name], sub)

    for name in COMMANDS:
        walk([name], root.load(name))
    return found


TREE = _tree()


def _option_panels(page: str) -> dict[str, str]:
    """The page's option panels by title ("Options", "Model", ...), each its lines under the title: every
    section that starts with an unindented ``Title:`` line, except the arguments and a group's commands."""
    panels = {}
    for section in page.split("\n\n"):
        title, _, body = section.partition("\n")
        if re.fullmatch(r"[A-Z][\w -]*:", title) and title not in ("Arguments:", "Commands:"):
            panels[title[:-1]] = body
    return panels


def _entries(page: str) -> dict[str, str]:
    """Each option's entry in a help page (its name line and the help lines under it, on one line), by each of
    its names (``-n`` and ``--windows``)."""
    blocks: list[str] = []
    for line in (line for section in _option_panels(page).values() for line in section.splitlines()):
        if line.startswith("  -"):
            blocks.append(line)
        else:
            blocks[-1] += line
    found = {}
    for block in blocks:
        words = block.split()
        for name in words[:words.index("/") + 2 if "/" in words else 2]:
            if name.startswith("-"):
                found[name.rstrip(",")] = " ".join(words) + " "
    return found


def _help(capsys, args: list[str]) -> str:
    code = main(args)
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


@pytest.mark.parametrize("path,command", TREE, ids=[" ".join(p) or "marketcast" for p, _ in TREE])
def test_help_fits_80_columns_with_plain_types(path, command, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    long = _help(capsys, [*path, "--help"])
    assert _help(capsys, [*path, "-h"]) == long
    assert long.startswith(f"Usage: marketcast {' '.join(path)}".rstrip())
    for bad in ("<bool>", "<list[", "<int", "<str>", "<float>", "9223372036854775807"):
        assert bad not in long
    assert max(map(len, long.splitlines())) <= WIDTH
    words = set(long.split())
    for param in command.params:
        assert param.param_type_name == "argument" or param.opts[0] in long, param.name
        for word in Text.from_markup(" ".join((param.help or "").split())).plain.split():
            assert word in words, f"{' '.join(path)} {param.name}: {word!r} is cut"


@pytest.mark.parametrize("path,command", TREE, ids=[" ".join(p) or "marketcast" for p, _ in TREE])
def test_every_option_that_takes_a_value_shows_a_default_or_an_example(path, command, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    entries = _entries(_help(capsys, [*path, "--help"]))
    for param in command.params:
        if param.param_type_name != "option" or getattr(param, "is_flag", False) or param.required:
            continue
        entry = entries[param.opts[0]].lower()
        assert "default" in entry or "e.g." in entry, f"{' '.join(path)} {param.opts[0]}: {entry}"


def test_types_ranges_and_defaults_print_as_people_expect(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    page = _help(capsys, ["backtest", "--help"])
    assert page.startswith("Usage: marketcast backtest [OPTIONS] [SYMBOLS]...\n")
    assert _help(capsys, ["sweep", "-h"]).startswith("Usage: marketcast sweep [OPTIONS] SPEC\n")
    assert _help(capsys, ["data", "-h"]).startswith("Usage: marketcast data [OPTIONS] COMMAND [ARGS]...\n")
    lines = _entries(page)
    assert "-n, --windows INTEGER|all " in lines["-n"] and "[default: 70]" in lines["-n"]
    assert "--start DATE " in lines["--start"] and "e.g. 2023-01-02" in lines["--start"]
    assert f"-m, --model {choice_list(MODEL_NAMES)} " in lines["-m"] and "[baseline|toto|kronos" in lines["-m"]
    assert "--seed INTEGER " in lines["--seed"] and "[0.." not in lines["--seed"]  # no upper bound to print
    assert "--fee FLOAT " in lines["--fee"] and "--data-dir PATH " in lines["--data-dir"]
    assert lines["--json"].split()[:2] == ["--json", "Print"]  # a flag takes no value
    assert "--spa / --no-spa " in lines["--spa"] and "[default: --spa]" in lines["--spa"]
    assert "--asset-class CLASS|SYMBOL=CLASS " in lines["--asset-class"]


def test_a_range_bounded_on_both_sides_prints_as_low_to_high(monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    demo = typer.Typer()

    @demo.command(cls=HelpCommand, context_settings=HELP_OPTIONS)
    def level(level: int = typer.Option(5, min=1, max=10, help="How loud."),
              ratio: float = typer.Option(0.5, min=0.0, help="A share.")) -> None:
        """A command of one bounded and one half-bounded option."""

    page = CliRunner().invoke(demo, ["-h"], prog_name="demo").output
    assert "--level INTEGER [1..10] " in page and "--ratio FLOAT " in page and "x>=" not in page


@pytest.mark.parametrize("path,option,choices", [
    (["backtest"], "--point", "[median|mean|pNN|quantile_Q|trimmed_mean_F|...]"),
    (["backtest"], "--fill-mode", "[touch|penetrate]"),
    (["backtest"], "--same-bar", "[pessimistic|nearest]"),
    (["backtest"], "--maxdiff-grid", "[atr|percent]"),
    (["backtest"], "--calibrate", "[none|conformal|quantile]"),
    (["backtest"], "--sizing", "[fixed|kelly|cvar]"),
    (["compile", "check"], "--mode", "[quick|full|production-check]"),
    (["compile", "enable"], "--model", "[toto|kronos|all]"),
])
def test_options_of_a_few_words_print_their_choices_and_refuse_others(path, option, choices, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    entry = _entries(_help(capsys, [*path, "--help"]))[option]
    assert re.sub(r"^-\w, ", "", entry).startswith(f"{option} {choices} ") and " TEXT " not in entry
    capsys.readouterr()
    assert main([*path, *(["--model", "baseline"] if path == ["compile", "check"] else []), option, "bogus"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"error: Invalid value for '{option}'") and "bogus" in err


def test_the_choice_lists_are_the_ones_the_code_accepts():
    from marketcast.backtest.config import CALIBRATIONS, MAXDIFF_GRIDS
    from marketcast.backtest.fills import FILL_MODES, SAME_BAR_MODES
    from marketcast.backtest.sizing import POLICIES
    from marketcast.commands.compile import CHECK_MODES
    from marketcast.compile.plan import CHECK_ITERATIONS

    assert CHECK_MODES == tuple(CHECK_ITERATIONS)
    assert (FILL_MODES, SAME_BAR_MODES, MAXDIFF_GRIDS, CALIBRATIONS, POLICIES) == (
        ("touch", "penetrate"), ("pessimistic", "nearest"), ("atr", "percent"), ("none", "conformal", "quantile"),
        ("fixed", "kelly", "cvar"))
    assert main(["backtest", "--point", "trimmed_mean_10", "--help"]) == 0  # a spec of the grammar, not a list


def _bracketed(text: str) -> list[str]:
    """The ``[words]`` a help text means to show: ``\\[default: x]`` (escaped) shows as ``[default: x]``, and an
    unescaped ``[data]`` is rich markup that would vanish."""
    return [m.group(1) for m in re.finditer(r"\\?\[([^\]\n]+)\]", text or "")
            if not re.fullmatch(r"/?[a-z ]*(bold|dim|red|green|yellow|cyan|magenta|italic)[a-z ]*|/", m.group(1))]


@pytest.mark.parametrize("path,command", TREE, ids=[" ".join(p) or "marketcast" for p, _ in TREE])
def test_no_bracketed_word_of_a_help_text_is_swallowed_as_markup(path, command, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    page = " ".join(_help(capsys, [*path, "--help"]).split())
    texts = [command.help, command.epilog, *(getattr(p, "help", None) for p in command.params)]
    for words in (w for text in texts for w in _bracketed(text)):
        assert f"[{' '.join(words.split())}]" in page, f"{' '.join(path)}: [{words}] vanished from --help"


def _pages() -> list[tuple[str, str, object]]:
    """Every help page at 200 columns (one option entry a line), with its command path and click command."""
    import os
    from contextlib import redirect_stdout
    from io import StringIO

    old, os.environ["COLUMNS"] = os.environ.get("COLUMNS"), "200"
    try:
        pages = []
        for path, command in TREE:
            with redirect_stdout(StringIO()) as out:
                assert main([*path, "--help"]) == 0
            pages.append((" ".join(path) or "marketcast", out.getvalue(), command))
        return pages
    finally:
        os.environ.pop("COLUMNS") if old is None else os.environ.__setitem__("COLUMNS", old)


PAGES = _pages()
# An option whose value differs in kind on purpose: each command lists the models it can take (finetune and
# compile a subset, trade run a fallback chain), and models compare takes one weights folder per model.
OWN_METAVAR = {"--model", "--weights"}
DATE_LIKE = re.compile(r"--(start|end|from|to|until|since|.*-date)$")
PATH_LIKE = re.compile(r"--(.*-(dir|file)|store|out|output|config|csv|png|plot)$")


def _metavars() -> dict[str, dict[str, list[str]]]:
    """Option name -> the word its entry shows as the value it takes -> the pages showing it (flags left out)."""
    found: dict[str, dict[str, list[str]]] = {}
    for name, page, command in PAGES:
        if "Options:\n" not in page:
            continue
        entries = _entries(page)
        for param in command.params:
            if param.param_type_name != "option" or param.is_flag or param.count:
                continue
            shown = next(w for w in entries[param.opts[0]].split() if not w.startswith("-"))
            found.setdefault(param.opts[0], {}).setdefault(shown, []).append(name)
    return found


METAVARS = _metavars()


def test_every_model_list_in_any_help_page_is_the_registrys():
    """A list of models that names the baseline, in brackets or parentheses, names every registered model in
    the registry's order: the top-level help said "(Toto, Kronos, baseline)" after four more were added."""
    names = "|".join(MODEL_NAMES)
    listing = re.compile(rf"[\[(]((?:{names})(?:(?:, ?|\|)(?:{names}))+)[\])]", re.IGNORECASE)
    seen = 0
    for name, page, _ in PAGES:
        for found in listing.finditer(" ".join(page.split())):
            listed = tuple(re.split(r", ?|\|", found.group(1).lower()))
            if "baseline" in listed:
                seen += 1
                assert listed == MODEL_NAMES, f"{name}: {found.group(0)}"
    assert "(" + ", ".join(MODEL_NAMES) + ")" in " ".join(PAGES[0][1].split())  # marketcast --help
    assert seen >= 5  # the root, backtest, forecast, compile check, trade replay: the check has lists to read


def test_an_option_shows_one_metavar_in_every_command():
    mixed = {opt: shown for opt, shown in METAVARS.items() if len(shown) > 1 and opt not in OWN_METAVAR}
    assert not mixed, mixed
    assert METAVARS["--start"] == {"DATE": ["backtest", "forecast", "data fetch", "trade replay"]}
    assert set(METAVARS["--store"]) == {"PATH"} and "models compare" in METAVARS["--store"]["PATH"]


def test_dates_and_paths_are_not_shown_as_text():
    for option, shown in METAVARS.items():
        if DATE_LIKE.match(option) and option != "--to":  # models download --to is a folder
            assert set(shown) == {"DATE"}, (option, shown)
        if PATH_LIKE.match(option) or option == "--to":
            assert set(shown) == {"PATH"}, (option, shown)
    assert {"--start", "--end", "--until", "--fan-date", "--state-dir", "--data-dir", "--store"} <= set(METAVARS)


def test_every_fee_shows_its_range():
    from marketcast.commands.options import FEE_RANGE

    pages = [(name, _entries(page)["--fee"]) for name, page, _ in PAGES if "--fee " in page]
    assert sorted(name for name, _ in pages) == ["backtest", "trade reconcile", "trade replay", "trade run"]
    for name, entry in pages:
        assert entry.startswith(f"--fee FLOAT [{FEE_RANGE[0]:g}..{FEE_RANGE[1]:g}] "), (name, entry)


def _names(section: str) -> list[str]:
    return [line.split()[0].rstrip(",") for line in section.splitlines() if line.startswith("  -")]


@pytest.mark.parametrize("path", [["backtest"], ["trade", "run"], ["forecast"], ["finetune"], ["trade", "replay"]])
def test_a_long_page_puts_its_options_in_panels_the_common_ones_first(path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    page = _help(capsys, [*path, "--help"])
    panels = _option_panels(page)
    assert list(panels)[0] == "Options" and len(panels) >= 3, list(panels)
    shown = [name for section in panels.values() for name in _names(section)]
    command = dict((tuple(p), c) for p, c in TREE)[tuple(path)]
    options = [p for p in command.params if p.param_type_name == "option"]
    first_names = [sorted(p.opts, key=lambda o: o.startswith("--"))[0] for p in options]
    assert sorted(shown) == sorted([*first_names, "-h"])  # each option once, none lost
    assert len(shown) == len(set(shown))


def test_the_first_screen_of_backtest_help_shows_the_common_options(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    first_screen = "\n".join(_help(capsys, ["backtest", "--help"]).splitlines()[:60])
    for name in ("--windows", "--start", "--end", "--model", "--weights", "--exit", "--output-dir", "--json"):
        assert name in first_screen, name
    for name in ("--borrow-rate", "--kelly-cap", "--cscv-splits", "--on-bad-line"):
        assert name not in first_screen, name


def test_a_declared_panel_is_drawn_and_a_short_page_stays_flat(capsys):
    little = typer.Typer(context_settings=HELP_OPTIONS)

    @little.command(cls=HelpCommand)
    def run(a: int = typer.Option(1, "--a", help="first."),
            b: int = typer.Option(2, "--b", help="second.", rich_help_panel="Tuning")) -> None:
        """Run."""

    flat = CliRunner().invoke(little, ["--help"], env={"COLUMNS": "80"}).output
    assert list(_option_panels(flat)) == ["Options"]  # 3 options: one list
    with_many = typer.Typer(context_settings=HELP_OPTIONS)
    names = [f"--o{i}" for i in range(17)]

    def many(**kwargs) -> None:
        """Many."""

    import inspect
    many.__signature__ = inspect.Signature([
        inspect.Parameter(n[2:], inspect.Parameter.KEYWORD_ONLY, default=typer.Option(
            0, n, help="x.", rich_help_panel="Tuning" if i % 2 else None), annotation=int)
        for i, n in enumerate(names)])
    with_many.command(cls=HelpCommand)(many)
    page = CliRunner().invoke(with_many, ["--help"], env={"COLUMNS": "80"}).output
    panels = _option_panels(page)
    assert list(panels) == ["Options", "Tuning"]
    assert _names(panels["Tuning"]) == names[1::2]
