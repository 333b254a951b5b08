"""``marketcast compile check`` piped into a log, as CI runs it: warnings once on stderr, rows as they finish."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# the root CLI with the tiny torch forecaster in toto's place ("shift" weights force a refused recompile)
CLI = ("import sys; from marketcast.forecast import registry; "
       "registry.FACTORIES['toto'] = 'tests.compile.tiny_forecaster:create'; "
       "from marketcast.commands import main; sys.exit(main(sys.argv[1:]))")


@pytest.fixture(scope="module")
def piped(tmp_path_factory):
    """One check whose compiled mode falls back to eager, stdout and stderr both pipes."""
    tmp = tmp_path_factory.mktemp("check")
    args = ["compile", "check", "--model", "toto", "--weights", "shift", "--modes", "default", "--iterations", "2",
            "--context", "64", "--horizon", "5", "--samples", "16", "--batch", "2",
            "--output-dir", str(tmp / "cc"), "--env-file", str(tmp / ".env.compile")]
    done = subprocess.run([sys.executable, "-c", CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done


def test_a_fallback_warning_is_one_warning_line_on_stderr_only(piped):
    said = [line for line in piped.stderr.splitlines() if "torch.compile disabled" in line]
    assert len(said) == 1 and said[0].startswith("warning: tiny: torch.compile disabled"), piped.stderr
    assert "torch.compile disabled" not in piped.stdout


def test_rows_stream_to_the_log_before_the_tables(piped):
    lines = piped.stdout.splitlines()
    first = [i for i, line in enumerate(lines) if line.startswith(("eager: ", "default: ", "SP500 ", "NASDAQ "))]
    title = next(i for i, line in enumerate(lines) if "compile check: toto" in line)
    assert lines[first[0]].startswith("eager: PASS (") and "p50 ms " in lines[first[0]]
    assert any(lines[i].startswith("default: FAIL (") for i in first)
    assert any(lines[i].startswith("SP500 default: ") for i in first)
    assert max(first[:6]) < title  # each mode's rows came before the summary tables
    stages = [line for line in piped.stderr.splitlines() if line.startswith("[")]
    assert stages[0].startswith("[1/6] compile check: eager: loaded") and "(eta " in stages[1], piped.stderr
