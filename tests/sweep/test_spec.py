"""The spec: its grid expands to the cells it names; every mistake is one line and exit 2, before Ray."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from marketcast.backtest.config import BacktestConfig
from marketcast.commands import main
from marketcast.errors import ConfigError
from marketcast.runs.cells import Cell
from marketcast.sweep import progress
from marketcast.sweep.plan import plan_jobs
from marketcast.sweep.spec import load_spec

from .helpers import write_bars

GRID = """
name = "study"

[data]
symbols = ["sp500", "NASDAQ"]

[options]
windows = 30
num_samples = 64

[grid]
model = ["baseline", "toto"]
fill_mode = ["touch", "penetrate"]

[[settings]]
name = "narrow"
ci_band = [0.45, 0.55]

[[settings]]
name = "wide"
ci_band = [0.3, 0.7]
ci_multiplier = 2.0

[models.toto]
weights = "Datadog/Toto-Open-Base-1.0"
device = "cuda"
num_samples = 512

[ray]
actors = 2
"""


def test_the_grid_is_the_product_of_symbols_axes_and_settings(tmp_path):
    path = tmp_path / "grid.toml"
    path.write_text(GRID)
    spec = load_spec(path)
    cells = spec.cells()
    assert spec.name == "study" and spec.symbols == ("SP500", "NASDAQ") and spec.ray == {"actors": 2}
    assert len(cells) == 2 * 2 * 2 * 2 and len({c.cell_id for c in cells}) == 16
    first = cells[0]
    assert (first.symbol, first.model, first.config.fill_mode, first.config.ci_band) == (
        "SP500", "baseline", "touch", (0.45, 0.55))
    assert first.config == BacktestConfig(windows=30, num_samples=64, ci_band=(0.45, 0.55))
    toto = [c for c in cells if c.model == "toto"]
    assert {(c.weights, c.device, c.config.num_samples) for c in toto} == {("Datadog/Toto-Open-Base-1.0", "cuda", 512)}
    wide = [c for c in cells if c.config.ci_band == (0.3, 0.7)]
    assert len(wide) == 8 and {c.config.ci_multiplier for c in wide} == {2.0}
    path.write_text(GRID.replace("[ray]\nactors = 2\n", "[ray]\nactors = 3\nflush_cells = 5\n"))
    assert load_spec(path).spec_hash == spec.spec_hash  # how to run is not what is run


def test_cells_share_a_forecast_only_where_the_forecast_cannot_differ():
    base = BacktestConfig(windows=20)
    cells = [Cell("A", base), Cell("A", BacktestConfig(windows=20, fill_mode="penetrate", point="mean")),
             Cell("B", base), Cell("A", BacktestConfig(windows=20, num_samples=64)),
             Cell("A", BacktestConfig(windows=20, seed=1)), Cell("A", base, model="toto"),
             Cell("A", BacktestConfig(windows=21))]
    jobs = plan_jobs(list(enumerate(cells)), {})
    # grouped by actor pool (the loaded model: the seed only reaches the forecast call), then in plan order
    assert [[p for p, _ in job.cells] for job in jobs] == [[0, 1], [2], [3], [4], [6], [5]]
    assert [len(chunk) for chunk in jobs[0].chunks(1)] == [1, 1]


def test_cells_with_another_min_context_get_their_own_forecast_job():
    """A job's windows are checked against its first cell's min_context: a count that fits 3 bars of history
    may not fit 300, so those cells must not share the check (their forecasts of the same windows agree)."""
    cells = [Cell("A", BacktestConfig(windows=20)), Cell("A", BacktestConfig(windows=20, min_context=3)),
             Cell("A", BacktestConfig(windows=20, min_context=300))]
    assert [[p for p, _ in job.cells] for job in plan_jobs(list(enumerate(cells)), {})] == [[0], [1], [2]]


def test_a_data_folder_gives_every_symbol_in_it(tmp_path):
    write_bars(tmp_path / "bars", ["MSFT", "aapl"])
    (tmp_path / "bars" / "notes.txt").write_text("not bars")
    path = tmp_path / "spec.toml"
    path.write_text('[data]\ndir = "bars"\n')
    spec = load_spec(path)
    assert spec.symbols == ("AAPL", "MSFT") and spec.data_dir == (tmp_path / "bars").resolve()
    assert spec.symbol_paths()["AAPL"].name == "aapl.csv"
    elsewhere = write_bars(tmp_path / "other", ["XYZ"])
    assert load_spec(path, data_dir=elsewhere).symbols == ("XYZ",)


@pytest.mark.parametrize("text, message", [
    ("[data]\nsymbols = ['SP500']\n[grid]\nfill_mode = 'touch'\n", "[grid] fill_mode must be a non-empty list"),
    ("[data]\nsymbols = ['SP500']\n[options]\nwindow = 3\n", "unknown option 'window'"),
    ("[data]\nsymbols = ['SP500']\n[options]\nwindows = '70'\n", "windows = '70' is not int"),
    ("[data]\nsymbols = ['SP500']\n[grid]\nfill_mode = ['touch', 'cross']\n", "fill_mode=cross: --fill-mode"),
    ("[data]\nsymbols = ['SP500']\n[options]\nfill_mode = 'touch'\n[grid]\nfill_mode = ['touch']\n",
     "fill_mode set in both [options] and [grid]"),
    ("[data]\nsymbols = ['SP500']\n[grid]\nmodel = ['prophet']\n", "model = 'prophet'; use one of"),
    ("[data]\nsymbols = ['SP500']\n[grid]\nci_band = [[0.4, 'x']]\n", "is not list of float"),
    ("[data]\nsymbols = ['SP500']\n[options]\nfee = 'cheap'\n", "fee = 'cheap' is not float or None"),
    ("[data]\nsymbols = ['SP500']\n[grid]\ncompile = ['fast']\n", "compile = 'fast'; use eager or one of"),
    ("[data]\nsymbols = ['SP500']\n[[settings]]\nname = 'a'\n[[settings]]\nname = 'b'\n",
     "two grid points give the same cells"),
    ("[data]\nsymbols = ['SP500']\n[ray]\nactors = 0\n", "[ray] actors = 0"),
    ("[data]\nsymbols = ['SP500', 'sp500']\n", "without repeats"),
    ("[grid]\nseed = [1]\n", "[data] needs symbols, a dir, or both"),
    ("[data]\nsymbols = ['SP500']\ncolour = 1\n", "[data] has unknown keys colour"),
    ("[data\n", "not valid TOML"),
])
def test_spec_mistakes_are_one_line_and_exit_2_without_starting_ray(tmp_path, capsys, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert main(["sweep", str(path), "--store", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("table, message", [
    ("[grid]\nwindows = [30, 0]\n", "grid point windows=0: --windows must be >= 1, got 0"),
    ("[grid]\nfee = [0.001, -0.002]\n", "grid point fee=-0.002: --fee must not be negative, got -0.002"),
    ("[options]\nwindows = 30\n[[settings]]\nname = 'bad'\nci_band = [0.7, 0.3]\n",
     "grid point settings 'bad': CI band must satisfy 0 <= low < high <= 1, got 0.7, 0.3"),
    ("[grid]\nseed = [0, -1]\n", "[grid]: seed = -1; a seed is an integer >= 0"),
    ("[options]\nseed = -5\n", "[options]: seed = -5; a seed is an integer >= 0"),
    ("[grid]\nexit = ['close', 'open']\n", "grid point exit=open: --exit must be one of close, next-open, got 'open'"),
    ("[grid]\nhold = [false, 'yes']\n", "[grid]: hold = 'yes' is not bool"),
])
def test_every_grid_value_backtest_config_refuses_fails_in_load_spec(tmp_path, table, message):
    path = tmp_path / "spec.toml"
    path.write_text("[data]\nsymbols = ['SP500']\n" + table)
    with pytest.raises(ConfigError) as caught:
        load_spec(path)
    assert message in str(caught.value) and str(caught.value).startswith(str(path)), caught.value


RAY_CHECK = """
import sys
from marketcast.commands import main
for spec in sys.argv[2:]:
    print(main(["sweep", spec, "--store", sys.argv[1]]), "ray" in sys.modules, file=sys.stdout, flush=True)
    print("--", file=sys.stderr, flush=True)
"""
BAD_SPECS = {  # spec -> what its one line says
    "[data]\nsymbols = ['SP500']\n[grid]\nwindows = [0]\n": "grid point windows=0: --windows must be >= 1, got 0",
    "[data]\nsymbols = ['SP500']\n[grid]\nfee = [-0.002]\n": "grid point fee=-0.002: --fee must not be negative",
    "[data]\nsymbols = ['SP500']\n[grid]\nseed = [-1]\n": "[grid]: seed = -1; a seed is an integer >= 0",
    "[data]\nsymbols = ['../SECRET']\ndir = 'bars'\n": "[data] symbols: '../SECRET' is not a symbol",
}


def test_a_bad_spec_exits_2_in_one_line_before_ray_is_even_imported(tmp_path):
    """One fresh interpreter runs every bad spec in turn: ``ray`` must still be unimported after the last."""
    (tmp_path / "bars").mkdir()
    (tmp_path / "SECRET.csv").write_text("timestamp,open,high,low,close\n")  # outside the data folder
    paths = []
    for i, text in enumerate(BAD_SPECS):
        paths.append(tmp_path / f"spec{i}.toml")
        paths[-1].write_text(text)
    src = str(Path(__file__).resolve().parents[2] / "src")
    done = subprocess.run([sys.executable, "-c", RAY_CHECK, str(tmp_path / "store"), *map(str, paths)],
                          capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin", "COLUMNS": "250"})
    assert done.stdout.split("\n")[:-1] == ["2 False"] * len(BAD_SPECS), done.stdout + done.stderr
    errors = done.stderr.split("--\n")[:-1]
    for path, message, err in zip(paths, BAD_SPECS.values(), errors):
        assert err.startswith(f"error: {path}") and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "store").exists()


def test_a_symbol_must_be_a_name_so_no_path_leaves_the_data_folder(tmp_path):
    write_bars(tmp_path / "bars", ["AAA"])
    path = tmp_path / "spec.toml"
    for bad in ("../SECRET", "bars/../../SECRET", "/etc/passwd", ".hidden", ""):
        path.write_text(f"[data]\nsymbols = [{bad!r}]\ndir = 'bars'\n")
        with pytest.raises(ConfigError, match="is not a symbol: .*; name the file and the symbol with ASCII"):
            load_spec(path)
    path.write_text("[data]\nsymbols = ['AAA', 'BRK.B']\ndir = 'bars'\n")  # names with a dot are fine
    spec = load_spec(path)
    assert spec.symbol_paths() == {"AAA": (tmp_path / "bars" / "AAA.csv").resolve(),
                                   "BRK.B": (tmp_path / "bars" / "BRK.B.csv").resolve()}


def test_a_single_symbol_spec_still_loads_into_its_cells(tmp_path):
    write_bars(tmp_path / "bars", ["AAA"])
    path = tmp_path / "spec.toml"
    path.write_text("[data]\nsymbols = ['AAA']\ndir = 'bars'\n[grid]\nseed = [0, 3]\n")
    cells = load_spec(path).cells()
    assert [(c.symbol, c.config.seed) for c in cells] == [("AAA", 0), ("AAA", 3)]


def test_the_exit_rule_is_an_axis_and_a_close_cell_keeps_its_id(tmp_path):
    write_bars(tmp_path / "bars", ["AAA"])
    path = tmp_path / "spec.toml"
    path.write_text("[data]\nsymbols = ['AAA']\ndir = 'bars'\n[grid]\nexit = ['close', 'next-open']\n")
    close, opened = load_spec(path).cells()
    assert (close.config.exit, opened.config.exit) == ("close", "next-open")
    assert close.settings()["exit"] == "close" and close.cell_id != opened.cell_id
    # a cell recorded before --exit existed (its settings had no exit) keeps its id under the default rule
    from marketcast.runs.cells import digest

    settings = close.settings()
    del settings["exit"], settings["timezone"], settings["hold"], settings["equity"]
    assert close.cell_id == digest({"symbol": "AAA", **settings})


def test_hold_is_an_axis_and_a_cell_that_does_not_hold_keeps_its_id(tmp_path):
    write_bars(tmp_path / "bars", ["AAA"])
    path = tmp_path / "spec.toml"
    path.write_text("[data]\nsymbols = ['AAA']\ndir = 'bars'\n[options]\nexit = 'next-open'\n[grid]\n"
                    "hold = [false, true]\n")
    churn, held = load_spec(path).cells()
    assert (churn.config.hold, held.config.hold) == (False, True) and held.config.exit == "next-open"
    assert churn.settings()["hold"] is False and churn.cell_id != held.cell_id
    # a cell recorded before --hold existed (its settings had no hold) keeps its id when it does not hold
    from marketcast.runs.cells import digest

    settings = churn.settings()
    del settings["hold"], settings["timezone"], settings["equity"]  # (no --equity either: it predates that too)
    assert churn.cell_id == digest({"symbol": "AAA", **settings})


def test_without_ray_the_sweep_says_how_to_get_it(tmp_path, capsys, monkeypatch):
    path = tmp_path / "spec.toml"
    path.write_text("[data]\nsymbols = ['SP500']\n")
    monkeypatch.setitem(sys.modules, "ray", None)  # as if the extra were not installed
    assert main(["sweep", str(path), "--store", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: marketcast sweep needs Ray, an optional extra: pip install 'marketcast[ray]'"
    assert not (tmp_path / "store").exists()


def test_the_progress_bar_counts_done_failing_and_remaining(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(progress, "err_console", Console(file=out, force_terminal=True, color_system=None, width=200))
    with progress.cell_progress(total=6, done=2, failed=0, title="sweep") as advance:
        advance("ok")
        advance("error")
    assert "3 ok · 1 failing · 2 remaining" in out.getvalue()
    log = io.StringIO()  # not a terminal: a line per finished cell, with an estimate of the time left
    monkeypatch.setattr(progress, "err_console", Console(file=log, force_terminal=False, width=200))
    with progress.cell_progress(total=3, done=1, failed=0, title="sweep r") as advance:
        advance("ok")
        advance("error")
    first, second = log.getvalue().splitlines()
    assert first.startswith("[2/3] sweep r: ok (2 ok, 0 failing, eta ") and first.endswith(" s)")
    assert second == "[3/3] sweep r: error (2 ok, 1 failing, eta 0 s)"


@pytest.mark.parametrize("body, says", [
    ('[data]\nsymbols = ["SP500"]\ndir = 3\n', "[data] dir = 3; give a folder path as a string"),
    ('[data]\nsymbols = ["SP500"]\n[options]\nwindows = 18446744073709551616\n',
     "options.windows = 18446744073709551616 is beyond a 64-bit integer"),
])
def test_fuzz_found_specs_are_one_line_before_ray(tmp_path, body, says):
    """Found by tests/fuzz: a non-string data dir was a TypeError, an integer beyond TOML's 64 bits crashed the
    run store's writer after Ray had run the cell."""
    spec = tmp_path / "s.toml"
    spec.write_text(body)
    with pytest.raises(ConfigError) as err:
        load_spec(spec)
    assert says in str(err.value)


PERIOD = ("[data]\ndir = 'bars'\n{data}[options]\nnum_samples = 16\ncontext = 32\nspa = false\n{options}"
          "[grid]\nseed = [0, 1]\n")


def _period_spec(tmp_path, data: str = "", options: str = ""):
    write_bars(tmp_path / "bars", ["AAA", "BBB"], n=90)  # business days from 2022-01-03 to 2022-05-06
    path = tmp_path / "spec.toml"
    path.write_text(PERIOD.format(data=data, options=options))
    return load_spec(path)


def test_start_and_end_give_each_cell_the_windows_of_the_period(tmp_path):
    spec = _period_spec(tmp_path, data="start = '2022-03-01'\nend = 2022-03-31\n")  # a string or a TOML date
    cells = spec.cells()
    assert [(c.symbol, c.config.seed, c.config.windows, c.end) for c in cells] == [
        (s, seed, 23, "2022-03-31") for seed in (0, 1) for s in ("AAA", "BBB")]  # March 2022: 23 weekdays
    undated = _period_spec(tmp_path)
    assert spec.spec_hash != undated.spec_hash
    assert {c.cell_id for c in cells}.isdisjoint(c.cell_id for c in undated.cells())
    opened = _period_spec(tmp_path, data="start = '2022-03-01'\n").cells()  # to the last settled bar, 2022-05-05
    assert [c.config.windows for c in opened] == [48] * 4 and {c.end for c in opened} == {None}


def test_windows_all_counts_every_window_of_each_symbol(tmp_path):
    write_bars(tmp_path / "bars", ["CCC"], n=60)
    cells = _period_spec(tmp_path, options="windows = 'all'\n").cells()
    assert {c.symbol: c.config.windows for c in cells} == {"AAA": 87, "BBB": 87, "CCC": 57}  # the baseline: 3 bars


def test_min_context_with_windows_all_skips_the_short_windows_of_each_symbol(tmp_path):
    """The backtest's rule (marketcast.backtest.context): the first window holds min_context real bars."""
    write_bars(tmp_path / "bars", ["CCC"], n=60)
    cells = _period_spec(tmp_path, options="windows = 'all'\nmin_context = 20\n").cells()
    assert {c.symbol: c.config.windows for c in cells} == {"AAA": 90 - 20, "BBB": 70, "CCC": 60 - 20}
    assert {c.config.min_context for c in cells} == {20}
    with pytest.raises(ConfigError, match="--min-context 2: a window needs at least 3 real bars"):
        _period_spec(tmp_path, options="windows = 'all'\nmin_context = 2\n").cells()
@pytest.mark.parametrize("data,options,message", [
    ("start = '2022-03-01'\n", "windows = 30\n", "[data] start/end and windows pick the windows two ways"),
    ("start = '2022-03-01'\nend = '2022-02-01'\n", "", "[data] end 2022-02-01 is before start 2022-03-01"),
    ("start = '1 March'\n", "", "[data] start '1 March': give a date as YYYY-MM-DD"),
    ("start = '2021-01-01'\nend = '2021-12-31'\n", "", "no window has its decision bar in 2021-01-01 to "
                                                         "2021-12-31; with 3 bars of history for the first window"),
])
def test_period_mistakes_in_a_spec_are_one_line(tmp_path, data, options, message):
    with pytest.raises(ConfigError) as caught:
        _period_spec(tmp_path, data=data, options=options)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_an_adapter_without_its_extra_is_refused_by_load_spec_not_in_each_cell(tmp_path, monkeypatch):
    import sys

    path = tmp_path / "spec.toml"
    path.write_text("[data]\nsymbols = ['SP500']\n[grid]\nmodel = ['baseline', 'tirex']\n")
    assert [c.model for c in load_spec(path).cells()] == ["baseline", "tirex"]  # installed: two cells
    monkeypatch.setitem(sys.modules, "tirex", None)  # the package as absent as import machinery can make it
    with pytest.raises(ConfigError, match=r"needs the optional package tirex-ts: pip install 'marketcast\[tirex\]'"):
        load_spec(path)


def _grid_spec(tmp_path, seeds: str, fees: str = "[0.001]") -> Path:
    path = tmp_path / "big.toml"
    path.write_text(f'name = "big"\n[data]\nsymbols = ["SP500", "NASDAQ"]\n[grid]\nseed = {seeds}\nfee = {fees}\n')
    return path


def test_a_grid_over_max_cells_is_refused_from_its_axes_with_the_count(tmp_path, capsys):
    seeds = "[" + ", ".join(map(str, range(1000))) + "]"
    fees = "[" + ", ".join(f"{i / 1e6:g}" for i in range(500)) + "]"
    assert main(["sweep", str(_grid_spec(tmp_path, seeds, fees)), "--local", "--store", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {tmp_path / 'big.toml'}: the grid has 1,000,000 cells (1,000 seed x 500 fee x 2 symbols), "
                   "more than --max-cells 100,000; shrink an axis or pass --max-cells 1000000"]
    assert not (tmp_path / "runs").exists()
    with pytest.raises(ConfigError, match="the grid has 4 cells .* more than --max-cells 3"):
        load_spec(_grid_spec(tmp_path, "[1, 2]"), max_cells=3)
    assert len(load_spec(_grid_spec(tmp_path, "[1, 2]"), max_cells=4).cells()) == 4


@pytest.mark.parametrize("seeds, fees, words", [
    ("[1, 2, 3, 2]", "[0.001]", "[grid] seed lists 2 twice"),
    ("[1]", "[0.001, 0.002, 0.001]", "[grid] fee lists 0.001 twice"),
])
def test_a_repeated_axis_value_is_named(tmp_path, seeds, fees, words):
    with pytest.raises(ConfigError, match=re.escape(words)):
        load_spec(_grid_spec(tmp_path, seeds, fees))


def test_max_cells_must_be_positive(tmp_path, capsys):
    assert main(["sweep", str(_grid_spec(tmp_path, "[1]")), "--local", "--max-cells", "0"]) == 2
    assert "Invalid value for '--max-cells': Input should be greater than or equal to 1" in capsys.readouterr().err
