"""The exit codes a supervisor reads: README's table, :class:`~marketcast.errors.ExitCode` and the table in
``errors.py``'s docstring say the same, and each code comes out of one real, documented case.

Cases 0-6 run in this process (``marketcast.commands.main``, the console script's entry); 4, 5 and 6 against the fake
Alpaca the trade tests use (a refused secret, a journal holding a halt, an account that answers HTTP 500 to
every retry). 130 and 143 are real signals sent to a ``marketcast backtest`` subprocess once its walk-forward
has started (the progress bar, forced onto the piped stderr with FORCE_COLOR, says so).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import marketcast.errors
from marketcast.commands import main
from marketcast.errors import ExitCode

ROOT = Path(__file__).resolve().parents[2]


def readme_table() -> dict[int, tuple[str, str]]:
    """code -> (meaning, example), from the ``| code | meaning | example |`` table of README.md."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("| code | meaning | example |")
    out = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        code, rest = line.strip().strip("|").split("|", 1)
        meaning, example = rest.rsplit("|", 1)
        out[int(code)] = (meaning.strip(), example.strip())
    return out


def readme_codes() -> dict[int, str]:
    """code -> meaning, from README.md's table."""
    return {code: meaning for code, (meaning, _) in readme_table().items()}


def readme_example(code: int) -> tuple[dict[str, str], list[str]]:
    """README's example for ``code``: ``(environment assignments before it, its arguments after marketcast)``;
    the example is the first backticked command of the row's last cell."""
    found = re.match(r"`([^`]+)`", readme_table()[code][1])
    assert found, (code, readme_table()[code][1])
    words = shlex.split(found[1])
    env = {}
    while "=" in words[0]:
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    assert words[0] == "marketcast", words
    return env, words[1:]


def test_every_row_of_the_readme_table_has_an_example_command():
    for code in readme_table():
        env, argv = readme_example(code)
        assert argv and all(name.isupper() for name in env), code


def docstring_codes() -> dict[int, str]:
    """code -> name, from the reStructuredText table of ``marketcast.errors``' docstring."""
    return {int(m["code"]): m["name"]
            for m in re.finditer(r"^(?P<code>\d+)\s+(?P<name>[A-Z_]+)\s{2,}\S", marketcast.errors.__doc__, re.M)}


def test_readme_the_enum_and_the_errors_docstring_list_the_same_codes():
    enum = {int(c): c.name for c in ExitCode}
    assert sorted(enum) == [0, 1, 2, 3, 4, 5, 6, 130, 143]
    assert sorted(readme_codes()) == sorted(enum)
    assert docstring_codes() == enum  # the same codes under the same names


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    return err


def test_0_done(capsys):
    assert main(readme_example(0)[1]) == ExitCode.OK
    assert capsys.readouterr().out.startswith("marketcast ")


def test_1_a_check_whose_verdict_is_fail(tmp_path, capsys):
    a, b = tmp_path / "eager.json", tmp_path / "compiled.json"
    a.write_text(json.dumps({"symbol": "SP500", "strategies": {"maxdiff": {"return": 0.10}}}))
    b.write_text(json.dumps({"symbol": "SP500", "strategies": {"maxdiff": {"return": 0.18}}}))  # delta 0.08 > 0.05
    assert readme_example(1)[1] == ["compile", "compare", "eager.json", "compiled.json"]
    assert main(["compile", "compare", str(a), str(b)]) == ExitCode.CHECK_FAILED
    assert "overall: FAIL" in capsys.readouterr().out


def test_2_a_bad_option(capsys):
    assert main(readme_example(2)[1]) == ExitCode.USAGE
    assert "--windows" in one_error_line(capsys)


def test_3_a_state_file_that_cannot_be_used(tmp_path, capsys):
    state = tmp_path / "state"
    state.mkdir()
    conn = sqlite3.connect(state / "journal.db")  # another program's database where the journal goes
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.commit()
    conn.close()
    assert main(["trade", "status", "--state-dir", str(state)]) == ExitCode.STATE
    assert "not a marketcast journal" in one_error_line(capsys)


def test_3_readmes_example_a_device_as_an_output(tmp_path, monkeypatch, capsys):
    """The README's /dev/null, played by a node of the same kind made in a temporary folder (the system's device
    is never handed to the command under test): a character device where this process may make one, else a FIFO."""
    import stat

    monkeypatch.chdir(tmp_path)
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        kind = "a character device"
    except PermissionError:
        os.mkfifo(node)
        kind = "a named pipe (FIFO)"
    argv = [str(node) if a == "/dev/null" else a for a in readme_example(3)[1]]
    assert str(node) in argv
    assert main(argv) == ExitCode.STATE  # refused before any work: the node is left as it is
    assert f"{node}: is {kind}, not a regular file" in one_error_line(capsys)
    assert list(tmp_path.iterdir()) == [node] and not node.is_file()


# ------------------------------------------------------------------ 4, 5, 6: the trade loop against the fake Alpaca


@pytest.fixture
def alpaca(monkeypatch, tmp_path):
    """A fake Alpaca serving the embedded SP500/NASDAQ up to 2018-07-20, the environment of a paper run
    pointed at it, and the run's arguments; the loop's log handlers are taken down afterwards."""
    from marketcast.trade.test_kit.alpaca_env import KEY, SECRET, embedded_fake

    monkeypatch.chdir(tmp_path)  # no marketcast.toml or .env.compile of the checkout
    monkeypatch.delenv("ADD_LATEST", raising=False)
    with embedded_fake("2018-07-20") as fake:
        for name, value in {"APCA_API_KEY_ID": KEY, "APCA_API_SECRET_KEY": SECRET, "APCA_API_BASE_URL": fake.url,
                            "APCA_API_DATA_URL": fake.url}.items():
            monkeypatch.setenv(name, value)
        yield fake, ["trade", "run", "--broker", "alpaca", "--symbols", "SP500,NASDAQ", "--state-dir",
                     str(tmp_path / "state"), "--once"]
    logger = logging.getLogger("marketcast")
    for handler in [h for h in logger.handlers if getattr(h, "_marketcast_trade", False)]:
        logger.removeHandler(handler)
        handler.close()


def error_lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]


def readme_trade_run(code: int, run: list[str], monkeypatch) -> list[str]:
    """README's example for ``code`` (its environment set), on the fixture's symbols and state folder."""
    env, argv = readme_example(code)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert argv == run[:4] + ["--once"]  # the fixture's command is the README's, plus where and what
    return [*argv, *run[4:-1]]


def test_4_the_broker_refuses_the_credentials(alpaca, monkeypatch, capsys):
    fake, run = alpaca
    run = readme_trade_run(4, run, monkeypatch)
    assert main(run) == ExitCode.AUTH
    [line] = error_lines(capsys)
    assert "HTTP 401" in line and "wrong" not in line
    assert [m for m, _, _ in fake.requests if m in ("POST", "DELETE")] == []


def test_5_trading_is_halted(alpaca, tmp_path, capsys, monkeypatch):
    from marketcast.trade.journal.state import Journal

    fake, run = alpaca
    run = readme_trade_run(5, run, monkeypatch)
    journal = Journal(tmp_path / "state" / "journal.db")
    journal.halts.add("reconcile", "the broker holds 3 SP500 the journal does not explain",
                      "marketcast trade reconcile --accept-broker --state-dir state")
    journal.close()
    assert main(run) == ExitCode.HALTED
    [line] = error_lines(capsys)
    assert "trading is halted since" in line and "To resolve: marketcast trade reconcile --accept-broker" in line
    assert [m for m, _, _ in fake.requests if m in ("POST", "DELETE")] == []  # nothing sent while halted


def test_6_the_broker_stays_unavailable_after_retries(alpaca, capsys, monkeypatch):
    fake, run = alpaca
    run = readme_trade_run(6, run, monkeypatch)
    fake.fail("GET", "/v2/account", status=500, times=10)
    assert main(run) == ExitCode.UNAVAILABLE
    [line] = error_lines(capsys)
    assert "HTTP 500" in line
    assert [p for m, p, _ in fake.requests if m == "GET"].count("/v2/account") == 4  # the first try and 3 retries


# ------------------------------------------------------------------ 130, 143: signals in the middle of a backtest


def backtest_then(sig: int, tmp_path: Path) -> tuple[int, str]:  # README's example for 130 and 143
    """Start a long ``marketcast backtest`` (baseline model), wait until its walk-forward has begun, send
    ``sig``; returns its exit status and stderr."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "FORCE_COLOR": "1", "COLUMNS": "120",
           "MARKETCAST_RUN_STORE": str(tmp_path / "runs")}
    argv = readme_example(ExitCode.INTERRUPTED if sig == signal.SIGINT else ExitCode.TERMINATED)[1]
    proc = subprocess.Popen([sys.executable, "-m", "marketcast.commands", *argv, "--output-dir", str(tmp_path / "out")],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.set_blocking(proc.stderr.fileno(), False)
    seen, deadline = b"", time.monotonic() + 240
    while b"backtest: " not in seen:  # the progress bar's first step: bars loaded, the walk-forward running
        assert proc.poll() is None and time.monotonic() < deadline, seen.decode(errors="replace")[-2000:]
        seen += proc.stderr.read() or b""
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(sig)
    try:
        proc.wait(timeout=120)
    finally:
        proc.kill()
    os.set_blocking(proc.stderr.fileno(), True)
    seen += proc.stderr.read()
    return proc.returncode, re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", seen).decode(errors="replace")


def test_130_ctrl_c_stops_a_backtest(tmp_path):
    code, err = backtest_then(signal.SIGINT, tmp_path)
    assert code == ExitCode.INTERRUPTED, err[-2000:]
    assert "Traceback" not in err and "error: " in err
    assert not (tmp_path / "out").exists()  # the half-done outputs never replaced the folder
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary folder left


def test_143_sigterm_stops_a_backtest_needs_the_sigterm_handler_of_failures(tmp_path):
    code, err = backtest_then(signal.SIGTERM, tmp_path)
    assert code == ExitCode.TERMINATED, err[-2000:]  # -15 without the handler: killed, nothing cleaned up
    assert "Traceback" not in err and "error: terminated (SIGTERM)" in err
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# ------------------------------------------------------------------ the installed command: paths, stores, a late signal


def installed(*args: str, cwd: Path, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``marketcast ARGS`` as a user runs it: the console script beside this Python (``python -m
    marketcast.commands`` where it is not installed), in ``cwd``, with the run store inside it."""
    script = Path(sys.executable).with_name("marketcast")
    argv = [str(script)] if script.is_file() else [sys.executable, "-m", "marketcast.commands"]
    env = {**os.environ, "MARKETCAST_RUN_STORE": str(cwd / "runs"), "COLUMNS": "120", **(env or {})}
    return subprocess.run([*argv, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def only_error(done: subprocess.CompletedProcess) -> str:
    """The one ``error:`` line of stderr (beside progress and ``warning:`` lines), and no traceback."""
    lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_2_a_fifo_input_is_refused_without_opening_it(tmp_path):
    os.mkfifo(tmp_path / "GOOG.csv")  # opening it would block until a writer came: the old hang
    done = installed("data", "check", "GOOG.csv", cwd=tmp_path, timeout=60)
    assert done.returncode == ExitCode.USAGE
    assert "GOOG.csv: is a named pipe (FIFO), not a regular file" in only_error(done)
    done = installed("backtest", "GOOG", "--data-dir", ".", "--output-dir", "out", cwd=tmp_path, timeout=60)
    assert done.returncode == ExitCode.USAGE and "is a named pipe (FIFO)" in only_error(done)
    assert not (tmp_path / "out").exists()


def test_3_an_output_folder_that_is_a_file_and_an_unwritable_plot(tmp_path):
    (tmp_path / "afile").write_text("x")
    done = installed("backtest", "--output-dir", "afile", cwd=tmp_path)
    assert done.returncode == ExitCode.STATE
    assert only_error(done) == (f"error: --output-dir {tmp_path / 'afile'}: exists and is not a folder; choose "
                                "another folder")
    done = installed("forecast", "SP500", "--plot", "/proc/nope/fan.png", cwd=tmp_path)
    assert done.returncode == ExitCode.STATE and "--plot /proc/nope/fan.png: cannot write in /proc" in only_error(done)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # nothing written, no run recorded


def _small_run(tmp_path: Path) -> Path:
    done = installed("backtest", "SP500", "--windows", "12", "--samples", "16", "--no-spa", "--output-dir", "out",
                     cwd=tmp_path)
    assert done.returncode == ExitCode.OK, done.stderr
    (part,) = (tmp_path / "runs").glob("*/part-*.parquet")
    return part


def test_3_a_damaged_and_a_foreign_run_store(tmp_path):
    part = _small_run(tmp_path)
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])  # cut short, as a full disk leaves it
    for args in (["runs", "show", "latest"], ["report", "latest", "--no-html", "--output-dir", "page"]):
        done = installed(*args, cwd=tmp_path)
        assert done.returncode == ExitCode.STATE, args
        assert f"{part} cannot be read as Parquet" in only_error(done) and "move that file away" in done.stderr
    assert not (tmp_path / "page").exists()
    (tmp_path / "foreign").write_text("not a store")
    done = installed("runs", "list", "--store", "foreign", cwd=tmp_path)
    assert done.returncode == ExitCode.STATE and "foreign is not a folder, so it is no run store" in only_error(done)


def test_130_a_signal_during_the_commit_finishes_the_record_and_says_so(tmp_path):
    """SIGINT sent from inside the run store's record (the commit: record, then the output folder's rename):
    the record and the rename finish, then the command stops with 130 and a line saying the run was recorded."""
    code = ("import os, signal, sys\n"
            "import marketcast.runs.record as record\n"
            "real = record.record_backtest\n"
            "def interrupted(*args, **kwargs):\n"
            "    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C lands while the run is being recorded\n"
            "    return real(*args, **kwargs)\n"
            "record.record_backtest = interrupted\n"
            "from marketcast.commands import main\n"
            "sys.argv[0] = 'marketcast'\n"
            "sys.exit(main())\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MARKETCAST_RUN_STORE": str(tmp_path / "runs")}
    done = subprocess.run([sys.executable, "-c", code, "backtest", "SP500", "--windows", "12", "--samples", "16",
                           "--no-spa", "--output-dir", "out"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == ExitCode.INTERRUPTED, done.stderr
    (run,) = [p.name for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    assert only_error(done) == (f"error: interrupted after the run finished and was recorded ({run}); its reports "
                                f"are in out/{run}")  # its folder is named by the run's id
    assert (tmp_path / "out" / run / "SP500.json").is_file() and "SP500" not in done.stdout  # no table printed after
    listed = installed("runs", "list", "--json", cwd=tmp_path)
    assert [(r["run_id"], r["status"], r["ok"]) for r in json.loads(listed.stdout)] == [(run, "done", 1)]
