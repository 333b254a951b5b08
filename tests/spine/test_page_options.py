"""``--trades-per-page`` (``backtest --html`` and ``report RUN``) out of range: one line naming the option, exit 2,
before any work (no output folder, the run store not opened)."""

import pytest

from marketcast.backtest.job import Job
from marketcast.commands import main
from marketcast.errors import ExitCode
from marketcast.report.paging import MAX_PER_PAGE, MIN_PER_PAGE, TRADES_PER_PAGE

BAD = [str(MIN_PER_PAGE - 1), str(MAX_PER_PAGE + 1), "0", "-5", "ten"]


@pytest.mark.parametrize("given", BAD)
def test_a_page_size_out_of_range_is_one_line_and_exit_2(given, tmp_path, capsys):
    out, store = tmp_path / "out", tmp_path / "store"
    code = main(["report", "some-run", "--store", str(store), "-o", str(out), "--trades-per-page", given])
    assert code == ExitCode.USAGE
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and "--trades-per-page" in err, err
    assert not out.exists() and not store.exists()


def test_the_range_ends_are_accepted(tmp_path, capsys):
    for given in (MIN_PER_PAGE, MAX_PER_PAGE):  # past the option check: the empty store is what stops it
        code = main(["report", "some-run", "--store", str(tmp_path / "store"), "--trades-per-page", str(given)])
        err = capsys.readouterr().err
        assert code == ExitCode.USAGE and "--trades-per-page" not in err and "holds no runs" in err, err


@pytest.mark.parametrize("given", BAD)
def test_backtest_refuses_it_before_reading_any_bar(given, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MARKETCAST_RUN_STORE", str(tmp_path / "runs"))
    out = tmp_path / "out"
    code = main(["backtest", "--windows", "5", "--html", "--output-dir", str(out), "--trades-per-page", given])
    assert code == ExitCode.USAGE
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and "--trades-per-page" in err, err
    assert not out.exists() and not (tmp_path / "runs").exists()


def test_the_backtest_job_defaults_to_the_report_layers_page_size():
    assert Job.__dataclass_fields__["trades_per_page"].default == TRADES_PER_PAGE
