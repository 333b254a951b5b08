"""The spec: its grid expands to the cells it names; every mistake is one line and exit 2, before Ray."""

from __future__ import annotations

import io
import sys

import pytest
from rich.console import Console

from marketcast.backtest.config import BacktestConfig
from marketcast.cli import main
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
    # grouped by loaded model (the seed seeds random weights too), then in plan order
    assert [[p for p, _ in job.cells] for job in jobs] == [[0, 1], [2], [3], [6], [4], [5]]
    assert [len(chunk) for chunk in jobs[0].chunks(1)] == [1, 1]


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
    quiet = io.StringIO()
    monkeypatch.setattr(progress, "err_console", Console(file=quiet, force_terminal=False))
    with progress.cell_progress(total=1, done=0, failed=0, title="sweep") as advance:
        advance("ok")
    assert quiet.getvalue() == ""
