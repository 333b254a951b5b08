"""Nothing destroyed, nothing unbounded (issue 56): special files as outputs, TOML nested without end, queries
that never end, option values past every limit, and a disk that fills up while a file is written.

Each keeps the harness's contract (one ``error:`` line, the README's code, no traceback, no hang, no file outside
``out/``) and its own promise: a FIFO or a device given as an output is refused with exit 3 and is still the same
node afterwards; a spec or config nested past the limit is exit 2 naming the file; ``runs query`` ends at its
``--timeout`` (exit 2) or answers with its rows cut (exit 0); an option past its limit or not finite is exit 2
naming the option; a write that meets ENOSPC or EDQUOT is exit 3 naming the file, and the file is as before.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from unittest import mock

from hypothesis import assume, event, given, note
from hypothesis import strategies as st

import marketcast.fileio
from marketcast.settings import MAX_TOML_DEPTH
from tests.fuzz.harness import check, counted, fuzz_settings, run, sandbox

PERIOD = ["--start", "2020-01-02", "--end", "2020-02-03"]


def _node(path: Path, kind: str, numbers: tuple[int, int]) -> str:
    """A FIFO, or a character device with the numbers of /dev/null, /dev/zero or /dev/full where this process may
    create one (else a FIFO, said as an event); returns the kind made."""
    if kind == "chardev":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(*numbers))
            return kind
        except PermissionError:
            event("mknod not allowed here: a FIFO instead")
    os.mkfifo(path)
    return "fifo"


def _same_node(path: Path, kind: str) -> bool:
    mode = os.lstat(path).st_mode
    return stat.S_ISFIFO(mode) if kind == "fifo" else stat.S_ISCHR(mode)


def _error(o) -> str:
    return next(line for line in o.err.splitlines() if line.startswith("error: "))


OUTPUTS = {  # command -> (argv for a node at NODE, the option the line names); state and stores under out/
    "trade orders --csv": lambda node, out: ["trade", "orders", "--state-dir", str(out / "state"), "--csv", node],
    "trade replay --png": lambda node, out: ["trade", "replay", *PERIOD, "--state-dir", str(out / "state"),
                                             "--png", node],
    "forecast --plot": lambda node, out: ["forecast", "SP500", "--plot", node],
    "compile enable --env-file": lambda node, out: ["compile", "enable", "--env-file", node],
    "finetune --out": lambda node, out: ["finetune", "--until", "2016-12-30", "--out", node],
}


@fuzz_settings(ci=6, long=300)
@given(st.sampled_from(["fifo", "chardev"]), st.sampled_from(sorted(OUTPUTS)),
       st.text("abcdefghijklmnopqrstuvwxyz0123456789_-.", min_size=1, max_size=40).filter(lambda n: n.strip(".")),
       st.sampled_from(["", ".csv", ".png", ".env"]), st.sampled_from([(1, 3), (1, 5), (1, 7)]))
def test_a_special_file_as_an_output_is_refused_and_stays(kind, command, stem, suffix, numbers):
    counted("special outputs")
    name = stem + suffix
    if command == "forecast --plot" and not name.endswith(".png"):
        name += ".png"  # any other suffix is refused first, for what it says, not for the node
    with sandbox() as root:
        made = _node(root / "in" / name, kind, numbers)
        event(f"{made} as {command}")
        o = run(root, OUTPUTS[command](str(root / "in" / name), root / "out"))
        note(repr(o))
        check(o, {"kind": made, "command": command}, codes=(3,))
        assert f"{root / 'in' / name}: is a " in _error(o) and "not a regular file" in _error(o), o.err
        assert _same_node(root / "in" / name, made) and os.listdir(root / "in") == [name]
        assert not (root / "out" / "state").exists()


def _deep(shape: str, depth: int) -> str:
    return {"dotted headers": "[" + ".".join(["a"] * depth) + "]\nx = 1\n",
            "arrays": "x = " + "[" * depth + "]" * depth + "\n",
            "inline tables": "x = " + "{ a = " * depth + "1" + " }" * depth + "\n",
            "under [trade]": "[trade." + ".".join(["a"] * depth) + "]\nx = 1\n"}[shape]


@fuzz_settings(ci=6, long=300)
@given(st.sampled_from(["dotted headers", "arrays", "inline tables", "under [trade]"]),
       st.one_of(st.integers(1, MAX_TOML_DEPTH - 1), st.integers(MAX_TOML_DEPTH, 5000)),
       st.sampled_from(["sweep", "trade replay"]))
def test_a_spec_or_config_nested_without_end_is_one_line(shape, depth, command):
    counted("deep TOML")
    deep = depth >= MAX_TOML_DEPTH
    event(f"{shape} via {command}, {'past the limit' if deep else 'within it'}")
    with sandbox() as root:
        path = root / "in" / "deep.toml"
        path.write_text(_deep(shape, depth))
        args = (["sweep", str(path), "--local", "--store", str(root / "out" / "runs")] if command == "sweep" else
                ["trade", "replay", "--config", str(path), *PERIOD, "--state-dir", str(root / "out" / "state")])
        o = run(root, args)
        note(repr(o))
        check(o, {"shape": shape, "depth": depth, "command": command}, codes=(2,))
        if deep:  # within the limit: refused for what else is wrong (keys it does not know, no bars then)
            assert str(path) in _error(o) and "deep" in _error(o) and len(_error(o)) < 400, o.err
        assert os.listdir(root / "out") == []  # no run store, no state folder


QUERIES = {
    "recursive CTE without end": "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
                                 "SELECT max(i) FROM r",
    "huge range": "SELECT sum(range) FROM range({n})",
    "huge range, every row": "SELECT * FROM range({n})",
    "cross joins": "SELECT count(*) FROM range({k}) a, range({k}) b, range({k}) c",
    "cross join of the store": "SELECT * FROM rows a, rows b, range({n}) c",
    "a file path": "SELECT * FROM '/etc/passwd'",
    "a file read": "SELECT * FROM read_csv('/etc/hostname')",
}


@fuzz_settings(ci=6, long=300)
@given(st.sampled_from(sorted(QUERIES)), st.integers(10**6, 10**13), st.integers(10**3, 10**5),
       st.sampled_from(["0.2", "0.5", "1"]), st.sampled_from(["5", "10000"]))
def test_an_unbounded_query_ends_within_its_limits(kind, n, k, timeout, max_rows):
    counted("unbounded queries")
    event(kind)
    with sandbox() as root:
        sql = QUERIES[kind].format(n=n, k=k)
        o = run(root, ["runs", "query", sql, "--timeout", timeout, "--max-rows", max_rows,
                       "--store", str(root / "out" / "runs"), "--json"], timeout=15)
        note(repr(o))
        check(o, {"sql": sql, "timeout": timeout}, codes=(0, 2))
        if o.code == 2:
            line = _error(o)
            assert ("time limit" in line or "query refused: it may read only the run store's tables" in line), line
        assert not (root / "out" / "runs").exists()  # a query creates no store


LIMITED = {  # option -> a command that takes it, checked before any model or data is loaded
    "--samples": ["backtest", "--samples"],
    "--horizon": ["forecast", "SP500", "--horizon"],
    "--batch-size": ["finetune", "--until", "2016-12-30", "--out", "OUT", "--batch-size"],
    "--windows": ["backtest", "--windows"],
    "--cash": ["trade", "replay", *PERIOD, "--state-dir", "STATE", "--cash"],
}


@fuzz_settings(ci=8, long=300)
@given(st.sampled_from(sorted(LIMITED)),
       st.one_of(st.sampled_from(["inf", "-inf", "nan", "NaN", "1e9", "1e308", "-1", "0", "99999999999999999999"]),
                 st.integers(10**7, 10**30).map(str)))
def test_an_option_past_its_limit_or_not_finite_is_refused(option, value):
    assume(option != "--cash" or value.lower().lstrip("-") in ("inf", "nan"))  # any finite cash is a cash
    counted("unbounded options")
    event(option)
    with sandbox() as root:
        argv = [str(root / "out" / a) if a in ("OUT", "STATE") else a for a in LIMITED[option]]
        o = run(root, [*argv, value])
        note(repr(o))
        check(o, {"option": option, "value": value}, codes=(2,))
        assert option in _error(o), o.err
        assert os.listdir(root / "out") == []


def _filling(after: int, code: int):
    """A writer that puts ``after`` bytes of the file down and then meets a full disk (or a spent quota)."""
    def write(tmp: Path, content) -> None:
        data = content.encode() if isinstance(content, str) else content if isinstance(content, bytes) else b"x" * 64
        with open(tmp, "wb") as fh:
            fh.write(data[:after])
        raise OSError(code, os.strerror(code))
    return write


@fuzz_settings(ci=6, long=300)
@given(st.sampled_from(["compile enable", "compile disable"]), st.integers(0, 80),
       st.sampled_from([errno.ENOSPC, errno.EDQUOT]), st.booleans())
def test_a_full_disk_names_the_file_and_leaves_it_as_it_was(command, after, code, existed):
    counted("disk full")
    event(f"{command}, {errno.errorcode[code]}, {'an old file' if existed else 'a new file'}")
    with sandbox() as root:
        env_file = root / "out" / "compile.env"
        if existed:
            env_file.write_text("TOTO_COMPILE=0\n")
        with mock.patch.object(marketcast.fileio, "_write", _filling(after, code)):
            o = run(root, [*command.split(), "--env-file", str(env_file)])
        note(repr(o))
        check(o, {"command": command, "after": after, "errno": code}, codes=(3,))
        line = _error(o)
        assert str(env_file) in line and os.strerror(code) in line, line
        assert os.listdir(root / "out") == (["compile.env"] if existed else [])  # no temporary file left
        if existed:
            assert env_file.read_text() == "TOTO_COMPILE=0\n"
