"""A set of output files is written all or nothing, keeps the permissions of what it replaces, and leaves no
temporary file behind; a run folder appears whole under its root, by one writer at a time, with ``latest``
following the newest; a full disk is exit 3."""

import os
import stat
import subprocess
import sys

import pytest

from marketcast.errors import DataError, ExitCode, StateError
from marketcast.fileio import exclusive, run_folder, write_atomic, write_files


def test_a_failure_on_one_file_leaves_the_folder_as_it_was(tmp_path):
    (tmp_path / "a.json").write_text("old a")
    (tmp_path / "b.md").write_text("old b")

    def third(path):  # a real OSError while writing the third file (its folder does not exist)
        (path.parent / "missing" / path.name).write_text("x")

    with pytest.raises(DataError, match=r"c\.csv: cannot write \(No such file or directory\)"):
        write_files(tmp_path, {"a.json": "new a", "b.md": b"new b", "c.csv": third}, DataError)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.md"]  # no temporary file, no c.csv
    assert (tmp_path / "a.json").read_text() == "old a" and (tmp_path / "b.md").read_text() == "old b"


def test_every_file_replaced_together_with_its_permissions_kept(tmp_path):
    target = tmp_path / "out" / "a.txt"
    write_atomic(target, "first")
    target.chmod(0o600)
    written = write_files(tmp_path / "out", {"a.txt": "second", "b.bin": lambda p: p.write_bytes(b"\x00\x01")})
    assert written == [target, tmp_path / "out" / "b.bin"]
    assert target.read_text() == "second" and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert (tmp_path / "out" / "b.bin").read_bytes() == b"\x00\x01"


def test_a_file_where_the_folder_should_be_is_one_line(tmp_path):
    (tmp_path / "taken").write_text("")
    with pytest.raises(DataError, match="taken exists and is not a folder"):
        write_files(tmp_path / "taken", {"a": "x"}, DataError)


def test_a_full_device_is_a_state_error_and_leaves_no_temporary_file(tmp_path):
    (tmp_path / "a.json").write_text("old a")

    def onto_a_full_device(path):  # the kernel's own ENOSPC, from /dev/full, while a file of the set is written
        path.write_text("partial")
        with open("/dev/full", "wb") as full:
            full.write(b"x" * 4096)
            full.flush()

    with pytest.raises(StateError) as caught:
        write_files(tmp_path, {"a.json": "new a", "b.md": onto_a_full_device}, DataError)
    assert str(caught.value) == (f"{tmp_path / 'b.md'}: cannot write (No space left on device); free space or fix "
                                 "the permissions and run again")
    assert caught.value.exit_code == ExitCode.STATE == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"] and (tmp_path / "a.json").read_text() == "old a"


def test_a_file_size_limit_is_a_state_error_in_a_real_process(tmp_path):
    """RLIMIT_FSIZE makes the kernel refuse the write (EFBIG), as a full disk refuses it: exit 3, not 2."""
    code = ("import resource, sys\n"
            "from marketcast.fileio import write_files\n"
            "from marketcast.errors import DataError, MarketcastError\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))\n"
            "try:\n"
            f"    write_files({str(tmp_path / 'out')!r}, {{'small.txt': 'x' * 10, 'big.txt': 'y' * 5000}}, DataError)\n"
            "except MarketcastError as exc:\n"
            "    print(exc)\n"
            "    sys.exit(exc.exit_code)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert done.stdout == (f"{tmp_path / 'out' / 'big.txt'}: cannot write (File too large); free space or fix the "
                           "permissions and run again\n")
    assert list((tmp_path / "out").iterdir()) == []


def _names(folder):
    return sorted(p.name for p in folder.iterdir())


def test_a_run_folder_appears_whole_holds_only_what_its_run_wrote_and_latest_follows(tmp_path):
    root = tmp_path / "out"
    write_files(root, {"notes.txt": "mine"})
    with run_folder(root, "r1") as out:
        write_files(out.path, {"SP500.json": "one", "trades.csv": "a,b\n"})
        assert not (root / "r1").exists() and not (root / "latest").exists()  # not yet
        out.commit()
    assert os.readlink(root / "latest") == "r1" and _names(root / "r1") == ["SP500.json", "trades.csv"]
    with run_folder(root, "r2") as out:
        write_files(out.path, {"NASDAQ.json": "two"})
        out.commit()
    assert os.readlink(root / "latest") == "r2" and _names(root / "latest") == ["NASDAQ.json"]  # no mix
    assert {p.name: p.read_text() for p in (root / "r1").iterdir()} == {"SP500.json": "one", "trades.csv": "a,b\n"}
    with run_folder(root, "r1") as out:  # a run reported again: its folder is replaced whole
        write_files(out.path, {"report.html": "page"})
        out.commit()
    assert _names(root / "r1") == ["report.html"] and os.readlink(root / "latest") == "r1"
    assert _names(root) == ["latest", "notes.txt", "r1", "r2"]  # no temporary folder, link or lock file
    assert (root / "notes.txt").read_text() == "mine"


def test_a_run_folder_not_committed_leaves_the_root_as_it_was(tmp_path):
    root = tmp_path / "out"
    with run_folder(root, "r1") as out:
        write_files(out.path, {"SP500.json": "one"})
        out.commit()
    with pytest.raises(RuntimeError, match="the record failed"):
        with run_folder(root, "r2") as out:
            write_files(out.path, {"SP500.json": "new", "trades.csv": "a,b\n"})
            raise RuntimeError("the record failed")
    assert _names(root) == ["latest", "r1"] and os.readlink(root / "latest") == "r1"
    with pytest.raises(RuntimeError):
        with run_folder(tmp_path / "new", "r1") as out:
            write_files(out.path, {"a": "x"})
            write_files(tmp_path / "new", {"plotly.js": "shared"})  # a page's shared file, written before the end
            raise RuntimeError("again")
    assert _names(tmp_path) == ["out"]  # a root made for the run does not appear at all


def test_a_second_writer_of_the_same_run_folder_is_refused_until_the_first_is_done(tmp_path):
    root = tmp_path / "out"
    dest = root / "r1"
    with run_folder(root, "r1"):
        with pytest.raises(StateError, match=rf"^{dest} is being written by another marketcast process "
                                             rf"\(pid {os.getpid()}\); wait for it to finish or choose another "
                                             "folder$") as caught:
            with run_folder(root, "r1"):
                pass
        assert caught.value.exit_code == 3
        with run_folder(root, "r2") as out:  # another run beside it is free, and its stage is not taken away
            out.commit()
    with run_folder(root, "r1") as out:
        write_files(out.path, {"a": "x"})
        out.commit()
    assert (dest / "a").read_text() == "x" and _names(root) == ["latest", "r1", "r2"]


def test_the_leftovers_of_a_killed_writer_are_removed_by_the_next(tmp_path):
    (tmp_path / ".r0.1234abcd.tmp").mkdir()
    (tmp_path / ".r0.1234abcd.tmp" / "SP500.json").write_text("half")
    (tmp_path / ".r0.lock").write_text("999999\n")  # its lock died with it: the file alone holds nothing
    (tmp_path / ".r9.5678abcd.tmp").mkdir()  # a writer still at work holds its lock: its stage stays
    with exclusive(tmp_path / ".r9.lock", "r9"):
        with run_folder(tmp_path, "r1") as out:
            write_files(out.path, {"a": "x"})
            out.commit()
        assert _names(tmp_path) == [".r9.5678abcd.tmp", ".r9.lock", "latest", "r1"]


@pytest.mark.parametrize("run_id", ["", ".hidden", "a/b", "../up"])
def test_a_run_id_that_is_not_one_name_is_refused(tmp_path, run_id):
    with pytest.raises(DataError, match="cannot name a run folder"):
        with run_folder(tmp_path / "out", run_id, DataError):
            pass
    assert _names(tmp_path) == []


def test_a_flush_that_fails_names_its_own_file_and_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    """The files of a set are flushed side by side: an error met flushing the second of three (a full disk
    found at fsync, as delayed allocation reports it) names that file, and nothing of the set is renamed."""
    import marketcast.fileio as fileio

    (tmp_path / "a.json").write_text("old a")
    real = os.fsync
    flushed = []

    def fsync(fd):
        name = os.readlink(f"/proc/self/fd/{fd}")
        flushed.append(os.path.basename(name))
        if ".b.md." in name:
            raise OSError(28, os.strerror(28))
        real(fd)

    monkeypatch.setattr(fileio.os, "fsync", fsync)
    with pytest.raises(StateError) as caught:
        write_files(tmp_path, {"a.json": "new a", "b.md": "b", "c.csv": "c"}, DataError)
    assert str(caught.value).startswith(f"{tmp_path / 'b.md'}: cannot write (No space left on device)")
    assert sorted(n.split(".")[1] for n in flushed) == ["a", "b", "c"]  # every file of the set was flushed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"] and (tmp_path / "a.json").read_text() == "old a"


def test_every_file_of_a_set_is_flushed_before_the_first_rename(tmp_path, monkeypatch):
    import marketcast.fileio as fileio

    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(fileio.os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(fileio.os, "replace", lambda a, b: (events.append("rename"), real_replace(a, b))[1])
    write_files(tmp_path, {f"f{i}.txt": str(i) for i in range(5)})
    assert events[:5] == ["fsync"] * 5 and events[5:10] == ["rename"] * 5  # then the folder's own fsync
    assert [(tmp_path / f"f{i}.txt").read_text() for i in range(5)] == [str(i) for i in range(5)]
