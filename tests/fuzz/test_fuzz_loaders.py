"""Property-based fuzzing of the bar loaders and ``marketcast data check``.

Whatever a file holds, the outcome is a valid load or exactly one line on stderr with exit code 2, never a
traceback. Valid bars re-encoded (separator, line ends, BOM, header style, column order, epoch or text
dates, Parquet types) load to the same bars. Examples are bounded and derandomized, so every run tests the
same files.
"""

from __future__ import annotations

import contextlib
import io
import re
import tempfile
import warnings
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from marketcast.commands import main
from marketcast.data import load_bars
from marketcast.data.load import ON_DUPLICATE
from marketcast.data.validate import MAX_VOLUME, PRICE_RANGE
from marketcast.errors import DataError, DataWarning
from tests.fuzz.harness import PROFILE
from tests.fuzz.tables import BarFile, check_bars_contract, garbage_files, mutated_files, valid_files

FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=150 if PROFILE == "ci" else 400,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MAX_PRICE = PRICE_RANGE[1]


def _written(file: BarFile, folder: str) -> Path:
    path = Path(folder) / f"BARS{file.suffix}"
    path.write_bytes(file.data)
    return path


def run_cli(*args: str) -> tuple[int, str, str]:
    """``marketcast ARGS`` in this process: (exit code, stdout, stderr); an unexpected exception propagates."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def _one_line_error(message: str, path: Path) -> None:
    assert "\n" not in message.strip() and "Traceback" not in message, message
    assert str(path) in message, message
    if path.suffix == ".parquet":
        assert "line" not in message, message  # Parquet has row groups and rows, not lines


@FUZZ
@given(valid_files())
def test_valid_bars_in_any_encoding_load_to_the_same_bars(file):
    with tempfile.TemporaryDirectory() as folder:
        path = _written(file, folder)
        bars = load_bars(path)
    expected = file.expected
    assert bars.frame.index.dtype == "datetime64[ns, UTC]", bars.frame.index.dtype  # whatever unit the file had
    assert (bars.frame.index == expected.index).all(), (bars.frame.index[:2], expected.index[:2])
    for col in ("open", "high", "low", "close", "volume"):
        np.testing.assert_allclose(bars.frame[col].to_numpy(), expected[col].to_numpy(), rtol=1e-12)


@FUZZ
@given(mutated_files(), st.sampled_from(ON_DUPLICATE))
def test_mutated_bars_load_or_fail_in_one_line(file, on_duplicate):
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = _written(file, folder)
        try:
            bars = load_bars(path, on_duplicate=on_duplicate)
        except DataError as exc:
            _one_line_error(str(exc), path)
            if file.bad_line is not None:  # an undecodable byte: the message names its line
                assert f"line {file.bad_line}" in str(exc), str(exc)
        else:
            check_bars_contract(bars, MAX_PRICE, MAX_VOLUME)
    for warning in caught:  # a price jump, dropped duplicates: one line naming the file and row
        assert issubclass(warning.category, DataWarning), warning
        _one_line_error(str(warning.message), path)


@FUZZ
@given(mutated_files() | garbage_files())
def test_data_check_exits_0_or_2_with_one_line(file):
    with tempfile.TemporaryDirectory() as folder:
        path = _written(file, folder)
        code, out, err = run_cli("data", "check", str(path))
    assert code in (0, 2), (code, err)
    if code == 2:
        assert err.startswith("error:") and out == "", (out, err)
        _one_line_error(err, path)
    else:
        assert f"{path}: OK" in out, out


@FUZZ
@given(garbage_files())
def test_arbitrary_bytes_load_or_fail_in_one_line(file):
    with tempfile.TemporaryDirectory() as folder:
        path = _written(file, folder)
        try:
            bars = load_bars(path)
        except DataError as exc:
            _one_line_error(str(exc), path)
        else:
            check_bars_contract(bars, MAX_PRICE, MAX_VOLUME)


def test_the_fuzzed_files_include_every_case_of_the_issue():
    """The strategies reach the inputs issue 19 lists (a header-only CSV, 1e300, semicolons, bad bytes)."""
    seen = set()

    @settings(derandomize=True, database=None, max_examples=300, deadline=None)
    @given(mutated_files() | valid_files())
    def collect(file):
        text = file.data.decode("utf-8", "replace")
        if file.suffix == ".csv" and text.strip() and len(text.strip().splitlines()) == 1:
            seen.add("header only")
        if re.search(r"1e300|e\+(29|30)\d", text):
            seen.add("huge")
        if file.suffix == ".csv" and text and ";" in text.splitlines()[0]:
            seen.add("semicolon")
        if file.bad_line:
            seen.add("bad byte")
        if file.suffix == ".parquet" and file.expected is not None:
            seen.add("parquet")

    collect()
    assert seen == {"header only", "huge", "semicolon", "bad byte", "parquet"}, seen
