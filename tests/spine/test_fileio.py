"""A set of output files is written all or nothing, keeps the permissions of what it replaces, and leaves no
temporary file behind."""

import stat

import pytest

from marketcast.errors import DataError
from marketcast.fileio import write_atomic, write_files


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
