"""A set of output files is written all or nothing, keeps the permissions of what it replaces, and leaves no
temporary file behind; an output folder is replaced whole, by one writer at a time; a full disk is exit 3."""

import os
import stat
import subprocess
import sys

import pytest

from marketcast.errors import DataError, ExitCode, StateError
from marketcast.fileio import output_folder, write_atomic, write_files


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


def test_an_output_folder_appears_whole_and_keeps_the_files_it_does_not_write(tmp_path):
    dest = tmp_path / "out"
    write_files(dest, {"SP500.json": "old", "notes.txt": "mine"})
    (dest / "notes.txt").chmod(0o600)
    with output_folder(dest) as out:
        write_files(out.path, {"SP500.json": "new", "trades.csv": "a,b\n"})
        assert (dest / "SP500.json").read_text() == "old" and not (dest / "trades.csv").exists()  # not yet
        out.commit()
    assert {p.name: p.read_text() for p in dest.iterdir()} == {"SP500.json": "new", "notes.txt": "mine",
                                                               "trades.csv": "a,b\n"}
    assert stat.S_IMODE((dest / "notes.txt").stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary folder, no lock file


def test_an_output_folder_not_committed_leaves_the_destination_as_it_was(tmp_path):
    dest = tmp_path / "out"
    write_files(dest, {"SP500.json": "old"})
    with pytest.raises(RuntimeError, match="the record failed"):
        with output_folder(dest) as out:
            write_files(out.path, {"SP500.json": "new", "trades.csv": "a,b\n"})
            raise RuntimeError("the record failed")
    assert {p.name: p.read_text() for p in dest.iterdir()} == {"SP500.json": "old"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with pytest.raises(RuntimeError):
        with output_folder(tmp_path / "new") as out:
            write_files(out.path, {"a": "x"})
            raise RuntimeError("again")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # a new folder does not appear at all


def test_a_second_writer_of_the_same_folder_is_refused_until_the_first_is_done(tmp_path):
    dest = tmp_path / "out"
    with output_folder(dest):
        with pytest.raises(StateError, match=rf"^{dest} is being written by another marketcast process "
                                             rf"\(pid {os.getpid()}\); wait for it to finish or choose another "
                                             "folder$") as caught:
            with output_folder(dest):
                pass
        assert caught.value.exit_code == 3
        with output_folder(tmp_path / "other") as out:  # another folder beside it is free
            out.commit()
    with output_folder(dest) as out:
        write_files(out.path, {"a": "x"})
        out.commit()
    assert (dest / "a").read_text() == "x" and sorted(p.name for p in tmp_path.iterdir()) == ["other", "out"]


def test_the_leftovers_of_a_killed_writer_are_removed_by_the_next(tmp_path):
    (tmp_path / ".out.1234abcd.tmp").mkdir()
    (tmp_path / ".out.1234abcd.tmp" / "SP500.json").write_text("half")
    (tmp_path / ".out.lock").write_text("999999\n")  # its lock died with it: the file alone holds nothing
    with output_folder(tmp_path / "out") as out:
        write_files(out.path, {"a": "x"})
        out.commit()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_folder_holding_folders_is_never_swapped_away(tmp_path):
    (tmp_path / "project" / "src").mkdir(parents=True)
    with pytest.raises(DataError, match=r"project holds src, which is not a plain file; write the outputs to a "
                                        r"folder of their own"):
        with output_folder(tmp_path / "project", DataError):
            pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["project"]
    assert [p.name for p in (tmp_path / "project").iterdir()] == ["src"]
