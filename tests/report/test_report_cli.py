"""``marketcast backtest --html`` and ``marketcast report RUN``: the page, its twin from the store, bad input."""

import re

from marketcast.commands import main
from marketcast.report.page import bundle_name
from tests.conftest import make_ohlcv
from tests.report.pagedata import figures
from tests.report.test_tearsheet import SECTIONS

FAST = ["--windows", "25", "--samples", "32", "--context", "64"]


def _one_error_line(capsys, *parts):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    for part in parts:
        assert part in err, err
    return err


def test_backtest_html_and_report_run_write_the_same_page(tmp_path, capsys):
    out, again = tmp_path / "bt", tmp_path / "again"
    assert main(["backtest", *FAST, "--html", "--output-dir", str(out)]) == 0
    run = (out / "latest").resolve().name
    assert f"tearsheet: {out / run / 'report.html'}" in capsys.readouterr().out
    page = (out / run / "report.html").read_text()
    assert len(figures(page)) == 2 * len(SECTIONS) and page.startswith("<!DOCTYPE html>")  # two symbols
    assert main(["report", "latest", "-o", str(again)]) == 0
    assert f"to {again / run}/ ({again / 'latest'} links it)" in capsys.readouterr().out
    assert sorted(p.name for p in again.iterdir()) == sorted(p.name for p in out.iterdir())  # run, latest, Plotly
    assert sorted(p.name for p in (again / run).iterdir()) == sorted(p.name for p in (out / run).iterdir())
    for path in (out / run).iterdir():
        assert (again / run / path.name).read_bytes() == path.read_bytes(), path.name
    assert not [p for p in [*out.iterdir(), *again.iterdir()] if p.name.startswith(".")]  # no temporary left
    assert main(["report", "latest", "--no-html", "-o", str(again)]) == 0  # the run's folder replaced whole
    assert sorted(p.name for p in (again / run).iterdir()) == ["NASDAQ.json", "SP500.json", "summary.md",
                                                               "trades.csv"]


def test_report_reads_the_stored_selection_figures_instead_of_computing_them_again(tmp_path, monkeypatch):
    """Issue 48: ``report RUN`` and ``runs show`` take each cell's multiple-testing figures from its
    ``selection.*`` columns; the SPA bootstrap and CSCV do not run again, and the files equal the backtest's
    byte for byte."""
    from marketcast.backtest import overfit

    out, again = tmp_path / "bt", tmp_path / "again"
    assert main(["backtest", *FAST, "--html", "--output-dir", str(out)]) == 0

    def refused(*args, **kwargs):
        raise AssertionError("a stored run's selection figures were computed again")

    monkeypatch.setattr(overfit, "spa_test", refused)
    monkeypatch.setattr(overfit, "cscv", refused)
    assert main(["report", "latest", "-o", str(again)]) == 0
    for path in (out / "latest").iterdir():
        assert (again / "latest" / path.name).read_bytes() == path.read_bytes(), path.name
    assert main(["runs", "show", "latest"]) == 0  # its verdict strip reads them too


def test_fan_dates_choose_the_fans(tmp_path):
    out = tmp_path / "bt"
    assert main(["backtest", "SP500", *FAST, "--html", "--fan-date", "2018-12-01", "--fan-date", "2018-11-26",
                 "--output-dir", str(out)]) == 0
    page = (out / "latest" / "report.html").read_text()
    fans = figures(page)["s0-SP500-fans"]
    titles = [a["text"] for a in fans["layout"]["annotations"]]
    assert titles == ["from 2018-11-26", "from 2018-11-30"]  # Saturday 1 December: the Friday before


def test_bad_fan_dates_stop_before_the_run_with_one_line(tmp_path, capsys):
    out = tmp_path / "bt"
    cases = [(["--html", "--fan-date", "soon"], ("--fan-date 'soon' is not a date",)),
             (["--html", "--fan-date", "1990-01-02"], ("--fan-date 1990-01-02", "choose dates in that span")),
             (["--fan-date", "2018-12-03"], ("add --html",))]
    for args, parts in cases:
        assert main(["backtest", *FAST, *args, "--output-dir", str(out)]) == 2
        _one_error_line(capsys, *parts)
        assert not out.exists()
    assert main(["report", "latest", "--no-html", "--fan-date", "2018-12-03"]) == 2
    _one_error_line(capsys, "drop --no-html")


def test_report_refuses_bars_that_changed_since_the_run(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    frame = make_ohlcv(n=150, seed=4)
    frame.to_csv(data / "AAA.csv", index_label="timestamp")
    assert main(["backtest", "AAA", *FAST, "--data-dir", str(data), "--output-dir", str(tmp_path / "bt")]) == 0
    assert main(["report", "latest", "-o", str(tmp_path / "same")]) == 0
    assert (tmp_path / "same" / "latest" / "report.html").exists()
    frame.iloc[-1, frame.columns.get_loc("close")] *= 1.01
    frame.iloc[-1, frame.columns.get_loc("high")] *= 1.01
    frame.to_csv(data / "AAA.csv", index_label="timestamp")
    capsys.readouterr()
    assert main(["report", "latest", "-o", str(tmp_path / "changed")]) == 2
    err = _one_error_line(capsys, "AAA's bars in", "changed since the run", "restore them")
    assert re.search(r"content hash [0-9a-f]{16}, the run read [0-9a-f]{16}", err)
    assert not (tmp_path / "changed").exists()  # nothing written: every page is drawn first
    assert main(["report", "latest", "--no-html", "-o", str(tmp_path / "tables")]) == 0  # the rest needs no bars
    assert not (tmp_path / "tables" / "latest" / "report.html").exists() and (tmp_path / "tables" / "latest" / "AAA.json").exists()


def test_report_reads_the_bars_again_the_way_the_run_read_them(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    frame = make_ohlcv(n=150, seed=5)
    frame = frame.iloc[list(range(100)) + [99] + list(range(100, 150))]  # one bar repeated: a yfinance export
    frame.to_csv(data / "AAA.csv", index_label="timestamp")
    assert main(["backtest", "AAA", *FAST, "--data-dir", str(data), "--output-dir", str(tmp_path / "bt")]) == 2
    assert "--on-duplicate" in capsys.readouterr().err
    assert main(["backtest", "AAA", *FAST, "--data-dir", str(data), "--on-duplicate", "last", "--html",
                 "--output-dir", str(tmp_path / "bt")]) == 0
    assert main(["report", "latest", "-o", str(tmp_path / "again")]) == 0  # the run store kept --on-duplicate
    assert (tmp_path / "again" / "latest" / "report.html").read_bytes() == (tmp_path / "bt" / "latest" / "report.html").read_bytes()


def test_report_of_an_unknown_run_is_one_line(capsys):
    assert main(["report", "no-such-run"]) == 2
    _one_error_line(capsys)


def test_a_grid_run_gets_a_page_per_grid_point(embedded_bars, tmp_path, monkeypatch):
    """A sweep-like run (two fill modes of SP500, recorded as the sweep records cells): a folder and a page each."""
    from dataclasses import replace

    from marketcast.backtest import BacktestConfig, run_many
    from marketcast.forecast.baseline import BaselineForecaster
    from marketcast.runs.cells import Cell, digest
    from marketcast.runs.rows import RunContext, fingerprint, ok_rows
    from marketcast.runs.store import RunStore

    store = RunStore(tmp_path / "store")
    sp500 = embedded_bars[0]
    base = BacktestConfig(windows=12, context=64, num_samples=16)
    cells = [Cell("SP500", replace(base, fill_mode=mode)) for mode in ("touch", "penetrate")]
    ctx = RunContext("sweep-test", "sweep", digest([c.cell_id for c in cells]), "test")
    store.write_info(ctx.run_id, {"kind": "sweep", "cells_total": 2})
    for i, cell in enumerate(cells):
        result = run_many([sp500], BaselineForecaster(), cell.config)[0]
        store.write_rows(ctx.run_id, ok_rows(ctx, cell, i, result, fingerprint(sp500), seconds=None))
    assert main(["report", "sweep-test", "--store", str(store.root), "-o", str(tmp_path / "out")]) == 0
    for mode in ("touch", "penetrate"):
        path = tmp_path / "out" / "sweep-test" / f"fill_mode={mode}" / "report.html"
        page = path.read_text()
        assert f"fill mode {mode}," in page and len(figures(page)) == len(SECTIONS)
        assert f'<script src="../../{bundle_name()}">' in page and (path.parent / "../.." / bundle_name()).is_file()
    assert len(list((tmp_path / "out").rglob("plotly-*.js"))) == 1  # one Plotly file for the whole root


def test_report_run_symbol_remakes_only_that_symbol(tmp_path, capsys):
    out, again = tmp_path / "bt", tmp_path / "again"
    assert main(["backtest", *FAST, "--output-dir", str(out)]) == 0
    assert main(["report", "latest", "SP500", "--no-html", "-o", str(again)]) == 0
    assert (again / "latest" / "SP500.json").read_bytes() == (out / "latest" / "SP500.json").read_bytes()
    assert not (again / "latest" / "NASDAQ.json").exists()
    capsys.readouterr()
    assert main(["report", "latest", "NOPE", "--no-html", "-o", str(tmp_path / "none")]) == 2
    _one_error_line(capsys, "no finished cell of NOPE")


def test_report_draws_the_stored_fans_and_forecasts_only_other_dates(tmp_path, monkeypatch):
    import marketcast.forecast.registry as registry

    out = tmp_path / "bt"
    assert main(["backtest", "SP500", *FAST, "--html", "--output-dir", str(out)]) == 0
    page = (out / "latest" / "report.html").read_text()

    def no_model(*args, **kwargs):
        raise AssertionError("report RUN loaded a model for fans the run stored")

    with monkeypatch.context() as patch:
        patch.setattr(registry, "load_forecaster", no_model)
        assert main(["report", "latest", "-o", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "latest" / "report.html").read_text() == page
    stored = [a["text"] for a in figures(page)["s0-SP500-fans"]["layout"]["annotations"]]
    assert "from 2018-12-20" not in stored
    assert main(["report", "latest", "--fan-date", "2018-12-20", "-o", str(tmp_path / "other")]) == 0
    other = figures((tmp_path / "other" / "latest" / "report.html").read_text())["s0-SP500-fans"]
    assert [a["text"] for a in other["layout"]["annotations"]] == ["from 2018-12-20"]  # forecast by the run's model
