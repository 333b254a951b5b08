"""Input that can never work is refused before the work, in one line with the README's code, and leaves nothing
(issue 56): a sweep none of whose symbols has data, a 20 MB sweep name, a --data-dir that is a file, and a file
name longer than the file system takes."""

from __future__ import annotations

from pathlib import Path

import pytest

from marketcast.commands import main


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def _spec(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(body)
    return path


def test_a_sweep_whose_symbols_all_lack_data_runs_no_cell(tmp_path, capsys):
    spec = _spec(tmp_path, 'name = "s"\n[data]\nsymbols = ["NOPE1", "NOPE2"]\n[options]\nwindows = 3\n'
                           '[grid]\nseed = [1, 2, 3]\n')
    assert main(["sweep", str(spec), "--local", "--store", str(tmp_path / "store")]) == 2
    line = _one_line(capsys)
    assert "no embedded data for any of its symbols (NOPE1, NOPE2)" in line and "SP500, NASDAQ" in line
    assert not (tmp_path / "store").exists()


def test_a_sweep_with_some_symbols_missing_is_not_refused_up_front(tmp_path):
    """Only a grid with no data at all is refused: one missing symbol still fails its own cells, as before."""
    from marketcast.sweep.spec import load_spec

    spec = _spec(tmp_path, 'name = "s"\n[data]\nsymbols = ["SP500", "NOPE"]\n[options]\nwindows = 3\n')
    assert load_spec(spec).symbols == ("SP500", "NOPE")


def test_a_data_dir_holding_none_of_the_symbols_names_what_it_has(tmp_path, capsys):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "AAPL.csv").write_text("date,open,high,low,close\n")
    spec = _spec(tmp_path, 'name = "s"\n[data]\nsymbols = ["MSFT"]\ndir = "data"\n')
    assert main(["sweep", str(spec), "--local", "--store", str(tmp_path / "store")]) == 2
    assert "holds none of" in (line := _one_line(capsys)) and "it has AAPL" in line
    assert main(["sweep", str(spec), "--local", "--store", str(tmp_path / "store"), "--data-dir", str(spec)]) == 2
    assert "is a file, not a data directory" in _one_line(capsys)
    assert not (tmp_path / "store").exists()


def test_a_huge_sweep_name_is_one_short_line(tmp_path, capsys):
    spec = _spec(tmp_path, f'name = "{"a" * 20_000_000}"\n[data]\nsymbols = ["SP500"]\n')
    assert main(["sweep", str(spec), "--local", "--store", str(tmp_path / "store")]) == 2
    line = _one_line(capsys)
    assert len(line) < 300 and "(20,000,000 characters)" in line and "at most 100" in line
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("length, refused", [(100, False), (101, True)])
def test_the_sweep_name_limit_is_exact(tmp_path, length, refused):
    from marketcast.errors import ConfigError
    from marketcast.sweep.spec import load_spec

    spec = _spec(tmp_path, f'name = "{"n" * length}"\n[data]\nsymbols = ["SP500"]\n')
    if refused:
        with pytest.raises(ConfigError, match="use at most 100"):
            load_spec(spec)
    else:
        assert load_spec(spec).name == "n" * length


def test_a_file_name_too_long_is_usage_not_a_full_disk(tmp_path, capsys):
    out = tmp_path / ("x" * 300)
    assert main(["backtest", "--windows", "3", "--output-dir", str(out)]) == 2
    line = _one_line(capsys)
    assert "file name too long" in line and "free space" not in line and len(line) < 200
    assert sorted(p.name for p in tmp_path.iterdir()) == []
