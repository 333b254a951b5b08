"""Running one fuzzed command in a sandbox, and the contract every run must keep.

Each example gets its own folder, ``in/`` (what the example was given), ``out/`` (the only place a command may
create files), ``cwd/`` (the working directory while it runs) and ``tmp/`` (``TMPDIR`` and
``tempfile.tempdir``); the run store defaults to ``out/runs``. The command runs in this process (an import
of pandas per example would cost seconds) under a ``SIGALRM`` timeout, and must end:

* with exit code 0 (and no ``error:`` line), or 2/3 with exactly ONE line on stderr starting ``error:``
  (``warning:`` lines and a stage's ``[2/4] ...`` progress lines allowed beside it; nothing else);
* without a traceback (an exception out of ``main`` is a bug: it propagates, so hypothesis tells two bugs
  apart by where they were raised);
* within the timeout (a hang is :class:`FuzzTimeout`, a ``BaseException`` no handler of the CLI swallows);
* without a file created outside ``out/`` (``in/``, ``cwd/`` and ``tmp/`` are snapshotted before and after).

Profiles: ``MARKETCAST_FUZZ=long`` raises every test's examples (>= 4,000 in all; ``make fuzz``), the
default ``ci`` profile keeps the suite well under three minutes on two cores. ``MARKETCAST_FUZZ_LOG=FILE``
appends every failing example as one JSON line (command, input, exit code, output), and
``MARKETCAST_FUZZ_SURVEY=1`` only logs failures instead of failing (to list every failure of a long run in
one go; the assertions themselves are unchanged). The number of examples run per test is printed at the end
of the session (``tests/fuzz/conftest.py``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, event, settings  # noqa: F401 - HealthCheck re-exported

from marketcast.commands import main

PROFILE = "long" if os.environ.get("MARKETCAST_FUZZ", "").lower() == "long" else "ci"
SURVEY = os.environ.get("MARKETCAST_FUZZ_SURVEY", "") not in ("", "0")
LOG = os.environ.get("MARKETCAST_FUZZ_LOG") or None
TIMEOUT_S = float(os.environ.get("MARKETCAST_FUZZ_TIMEOUT", "20"))

for _name in ("ci", "long"):
    settings.register_profile(f"marketcast-fuzz-{_name}", derandomize=True, database=None, deadline=None,
                              print_blob=True,
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                     HealthCheck.filter_too_much,
                                                     HealthCheck.function_scoped_fixture])

EXAMPLES: Counter = Counter()  # test name -> examples run, printed by conftest.py
FAILURES: Counter = Counter()  # failure kind -> examples (survey mode)


def fuzz_settings(ci: int, long: int) -> settings:
    """The profile's settings with this test's number of examples (``ci`` by default, ``long`` for
    MARKETCAST_FUZZ=long)."""
    return settings(settings.get_profile(f"marketcast-fuzz-{PROFILE}"), max_examples=ci if PROFILE == "ci" else long)


class FuzzTimeout(BaseException):
    """The command ran past the per-example timeout (a hang)."""


class ReachedRay(BaseException):
    """Raised in place of starting Ray: everything before it (the spec, the store) was checked."""


@dataclass
class Outcome:
    args: list[str]
    code: int | None
    out: str
    err: str
    seconds: float
    exception: BaseException | None = None
    reached_ray: bool = False
    created: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)


def _snapshot(root: Path, skip: tuple[Path, ...]) -> dict[str, tuple[int, int]]:
    found = {}
    for path in root.rglob("*"):
        if any(path == s or s in path.parents for s in skip):
            continue
        try:
            st = path.lstat()
        except OSError:
            continue
        found[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns) if path.is_file() else (-1, 0)
    return found


_SESSION: dict[str, Path] = {}


def session_root() -> Path:
    """One folder for every example of this session (removed example by example), and a shared cache."""
    if "root" not in _SESSION:
        import atexit

        _SESSION["root"] = Path(tempfile.mkdtemp(prefix="marketcast-fuzz-"))
        (_SESSION["root"] / "cache").mkdir()
        atexit.register(shutil.rmtree, _SESSION["root"], ignore_errors=True)
    return _SESSION["root"]


@contextlib.contextmanager
def sandbox():
    """An example's folder: in/ out/ cwd/ tmp/; removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="ex-", dir=session_root()))
    for name in ("in", "out", "cwd", "tmp"):
        (root / name).mkdir()
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _alarm(_signum, _frame):
    raise FuzzTimeout(f"no answer in {TIMEOUT_S:g} s")


@contextlib.contextmanager
def _environment(root: Path, env: dict[str, str]):
    saved_env = {k: os.environ.get(k) for k in ("TMPDIR", "MARKETCAST_RUN_STORE", "MARKETCAST_CACHE_DIR", *env)}
    saved_cwd, saved_tempdir = os.getcwd(), tempfile.tempdir
    os.environ.update({"TMPDIR": str(root / "tmp"), "MARKETCAST_RUN_STORE": str(root / "out" / "runs"),
                       # a cache is meant to outlive a command: the session's own, not checked
                       "MARKETCAST_CACHE_DIR": str(session_root() / "cache"), **env})
    tempfile.tempdir = str(root / "tmp")
    os.chdir(root / "cwd")
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        tempfile.tempdir = saved_tempdir
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run(root: Path, args: list[str], env: dict[str, str] | None = None, timeout: float | None = None) -> Outcome:
    """``marketcast ARGS`` in this process, in ``root``'s sandbox, under a timeout."""
    before = _snapshot(root, (root / "out",))
    out, err = io.StringIO(), io.StringIO()
    code, exception, reached = None, None, False
    previous = signal.signal(signal.SIGALRM, _alarm)
    start = time.monotonic()
    try:
        with _environment(root, env or {}), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            signal.setitimer(signal.ITIMER_REAL, timeout or TIMEOUT_S)
            try:
                code = main(list(args))
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    except ReachedRay:
        reached = True
    except BaseException as exc:  # noqa: BLE001 - a traceback, a hang: judged by check()
        if isinstance(exc, KeyboardInterrupt) and not isinstance(exc, FuzzTimeout):
            raise
        exception = exc
    finally:
        signal.signal(signal.SIGALRM, previous)
    seconds = time.monotonic() - start
    after = _snapshot(root, (root / "out",))
    created = sorted(set(after) - set(before))
    changed = sorted(k for k in set(before) & set(after) if before[k] != after[k] and before[k][0] >= 0)
    changed += sorted(f"{k} (removed)" for k in set(before) - set(after))
    return Outcome(list(args), code, out.getvalue(), err.getvalue(), seconds, exception, reached, created, changed)


def problems(o: Outcome, codes: tuple[int, ...] = (0, 2, 3)) -> list[str]:
    """What ``o`` broke of the contract (empty: nothing)."""
    found = []
    if isinstance(o.exception, FuzzTimeout):
        found.append("hang")
    elif o.exception is not None:
        found.append(f"traceback {type(o.exception).__name__}")
    if "Traceback" in o.out or "Traceback" in o.err:
        found.append("traceback in output")
    if o.code is not None:
        lines = [line for line in o.err.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("error:")]
        if o.code not in codes:
            found.append(f"exit {o.code}")
        elif o.code in (2, 3):
            others = [line for line in lines if not line.startswith(("error:", "warning:"))
                      and not re.match(r"\[\d+/\d+\] ", line)]  # a stage's progress line, as a log gets it
            if len(errors) != 1 or others:
                found.append(f"stderr not one error line (errors {len(errors)}, other lines {len(others)})")
        elif o.code == 0 and errors:
            found.append("exit 0 with an error line")
    if o.created:
        found.append("file created outside out/")
    return found


def check(o: Outcome, given: dict, codes: tuple[int, ...] = (0, 2, 3)) -> None:
    """Assert the contract for ``o``; ``given`` describes the input (logged with a failure)."""
    event(f"exit {o.code}" if o.code is not None else ("reached Ray" if o.reached_ray else "no exit code"))
    if o.changed:
        event("an input file changed")
    found = problems(o, codes)
    if found and LOG:
        record = {"problems": found, "command": ["marketcast", *o.args], "given": given, "code": o.code,
                  "stdout": o.out[-1500:], "stderr": o.err[-3000:], "seconds": round(o.seconds, 2),
                  "exception": None if o.exception is None else f"{type(o.exception).__name__}: {o.exception}",
                  "where": _origin(o.exception), "created": o.created[:20], "changed": o.changed[:20]}
        with open(LOG, "a") as fh:
            fh.write(json.dumps(record, default=str) + "\n")
    for kind in found:
        FAILURES[kind] += 1
    if not found or SURVEY:
        return
    if o.exception is not None and not isinstance(o.exception, FuzzTimeout):
        raise o.exception  # its own traceback: where it was raised tells two bugs apart
    assert not isinstance(o.exception, FuzzTimeout), (o.args, "hang", o.err[-2000:])
    assert "Traceback" not in o.out + o.err, (o.args, o.err[-3000:])
    assert o.code in codes, (o.args, o.code, o.err[-3000:])
    assert not o.created, (o.args, "created outside out/", o.created[:20])
    assert not found, (o.args, found, o.code, o.err[-3000:])


def _origin(exc: BaseException | None) -> str | None:
    if exc is None or exc.__traceback__ is None:
        return None
    frames, tb = [], exc.__traceback__
    while tb is not None:
        frames.append(f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}")
        tb = tb.tb_next
    ours = [f for f in frames if "/marketcast/" in f and "/tests/" not in f]
    return " <- ".join(dict.fromkeys([*(ours[-1:]), frames[-1]]))


def counted(name: str) -> None:
    EXAMPLES[name] += 1
