"""Atomic file writes: hidden temporary files in the target folder, flushed to disk, renamed over the targets.

A reader sees the old file or the new one, never a half one, even when the writer is killed; the temporary
name (``.<name>.<random>.tmp``) matches no glob of real files. :func:`write_files` writes a set of files (a
run's reports) all or nothing: every file is written first, then all are flushed (side by side), and only then
are they renamed, so an error (a full disk on the third file) leaves the folder as it was. A target that exists
keeps its permissions, unless ``mode`` is given: then each temporary file has exactly ``mode`` from its creation,
before its first byte (a private file is never readable by others, not even while it is written).

:func:`output_folder` makes a whole output folder one transaction: the files go into a hidden sibling folder
(``.<dest>.<random>.tmp``) and :meth:`OutputFolder.commit` swaps it in for ``<dest>`` in one rename, after
everything else (the run-store record) succeeded; until then ``<dest>`` is untouched, and a failure or a signal
removes the temporary folder. ``.<dest>.lock`` beside it holds an exclusive ``flock`` while a command writes, so a
second command writing the same folder is refused (one line, exit 3: the folder is busy, nothing is wrong with
the input); the lock file is removed when the command ends, and a lock of a killed process dies with it.

Outputs only ever replace regular files: a path that exists as a FIFO, a device or a socket (``--csv /dev/null``)
is refused with one :class:`StateError` line (exit 3), by :func:`check_writable` before any work and again by
the writer itself just before its rename, which would otherwise put a regular file in place of the device node.

:func:`run_folder` is the one used for reports: ``--output-dir`` names a root, and each run writes its own folder
``<root>/<run id>`` (:func:`new_run_id`) as above, never a mix of two runs; once it is in place the link
``<root>/latest`` is pointed at it (a fresh link renamed over the old one: a reader always finds one). Run folders
and ``latest`` are ours to replace; nothing else under the root is touched.

Before any work :func:`check_writable` refuses an output that cannot be created or written (a file where a
folder should be, a read-only or pseudo filesystem, a FIFO or a device) with a :class:`StateError` (exit 3), as
the README's exit-code table says of "an output folder or plot path that cannot be created or written". A path
that still fails when written (a folder removed meanwhile) is the caller's ``error``; every other failure to
write (a full disk, a quota, no permission, a read-only filesystem) is a :class:`StateError` (exit 3).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import glob
import os
import re
import shutil
import tempfile
import uuid
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator, Mapping, Union

from marketcast.errors import MarketcastError, StateError
from marketcast.paths import special
from marketcast.signals import shielded

Content = Union[bytes, str, Callable[[Path], object]]  # the bytes, the text, or a function writing the path


#: errno of a path that does not work as given (bad input); any other OSError while writing is the machine's
PATH_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.ENAMETOOLONG, errno.ELOOP, errno.EEXIST})


def write_error(path: Path, exc: OSError, error: type[MarketcastError], what: str = "cannot write") -> MarketcastError:
    """One line for ``exc`` on ``path``: the caller's ``error`` for a bad path, a StateError (exit 3) for a full
    disk, a quota, a permission or a read-only filesystem."""
    reason = exc.strerror or str(exc)
    if exc.errno in PATH_ERRNOS:
        return error(f"{path}: {what} ({reason})")
    return StateError(f"{path}: {what} ({reason}); free space or fix the permissions and run again")


def refuse_special(path: str | Path, what: str = "") -> Path:
    """``path`` unless it exists as something other than a regular file or a folder (a FIFO, a device, a socket,
    or a link to one): then one :class:`StateError` line (exit 3) naming ``what`` (the option) and what it is."""
    kind = special(path)
    if kind is not None:
        label = f"{what} {path}" if what else str(path)
        raise StateError(f"{label}: is {kind}, not a regular file; marketcast reads and replaces only regular "
                         "files: choose another path or remove it")
    return Path(path)


def check_writable(path: str | Path, what: str, folder: bool = True) -> Path:
    """Before any work: ``path`` (an output folder, or a file when ``folder`` is False) can be created or replaced
    and written; else one :class:`StateError` line (exit 3) naming ``what`` (the option) and the fix: a FIFO or a
    device at ``path``, or directly in the folder ``path``, is refused too (:func:`refuse_special`). Nothing is
    left behind: the nearest folder that exists gets a hidden probe file, created and removed (a file where a
    folder should be, a read-only or pseudo filesystem, a missing permission all show there). A backtest used to
    run for 11 s before finding its ``--output-dir`` was a file."""
    path = Path(os.path.abspath(Path(path).expanduser()))
    refuse_special(path, what)
    if folder and path.is_dir():  # the files the command replaces there: none may be a FIFO or a device
        try:
            entries = [entry.path for entry in os.scandir(path)]
        except OSError:
            entries = []  # an unreadable folder: the probe below names it
        for entry in entries:
            refuse_special(entry, f"{what} {path} holds")
    if folder and path.exists() and not path.is_dir():
        raise StateError(f"{what} {path}: exists and is not a folder; choose another folder")
    if not folder and path.is_dir():
        raise StateError(f"{what} {path}: is a folder; give a file name")
    nearest = path if folder else path.parent
    while not os.path.lexists(nearest) and nearest != nearest.parent:
        nearest = nearest.parent
    if not nearest.is_dir():
        raise StateError(f"{what} {path}: {nearest} is not a folder, so it cannot be created; choose another path")
    try:
        fd, probe = tempfile.mkstemp(prefix=".marketcast-probe-", dir=nearest)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise StateError(f"{what} {path}: cannot write in {nearest} ({exc.strerror}); choose a writable folder or "
                         "fix its permissions") from None
    return path


def make_folder(folder: str | Path, error: type[MarketcastError] = MarketcastError) -> Path:
    """``folder`` (created with its parents); a folder that cannot be made is one ``error`` line."""
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise error(f"{path} exists and is not a folder; choose another output folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(path, exc, error, "cannot create the folder") from None
    return path


def _write(tmp: Path, content: Content) -> None:
    if isinstance(content, bytes):
        tmp.write_bytes(content)
    elif isinstance(content, str):
        tmp.write_text(content, encoding="utf-8", newline="")
    else:
        content(tmp)


def _sync(path: Path) -> OSError | None:
    """``path`` flushed to disk; the error instead of raising it (:func:`_sync_all` names the file)."""
    try:
        with open(path, "rb+") as fh:
            os.fsync(fh.fileno())
    except OSError as exc:
        return exc
    return None


def _sync_all(paths: list[Path]) -> list[OSError | None]:
    """:func:`_sync` of each path, side by side when there are several: the disk overlaps the flushes (a
    backtest's 4 reports: about 5 ms instead of 20 on an idle ext4 disk)."""
    if len(paths) < 2:
        return [_sync(p) for p in paths]
    from concurrent.futures import ThreadPoolExecutor  # only where several files are written at once

    with ThreadPoolExecutor(max_workers=min(len(paths), 8)) as pool:
        return list(pool.map(_sync, paths))


def _create(tmp: Path, mode: int) -> None:
    """``tmp`` created empty with exactly ``mode`` (whatever the umask)."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def write_files(folder: str | Path, files: Mapping[str, Content],
                error: type[MarketcastError] = MarketcastError, mode: int | None = None) -> list[Path]:
    """Write ``name -> content`` into ``folder`` all or nothing; returns the paths written."""
    root = make_folder(folder, error)
    for name in files:
        refuse_special(root / name)
    staged: list[tuple[Path, Path]] = []
    renamed = 0
    try:
        for name, content in files.items():
            final = root / name
            tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex[:8]}.tmp")
            staged.append((tmp, final))
            if mode is not None:
                _create(tmp, mode)
            _write(tmp, content)
            if mode is None and final.exists():
                os.chmod(tmp, final.stat().st_mode & 0o7777)
        for (_, final), failed in zip(staged, _sync_all([tmp for tmp, _ in staged])):
            if failed is not None:
                raise write_error(final, failed, error) from None
        for _, final in staged:  # again at the last moment: a rename would put a file in place of a device
            refuse_special(final)
        for tmp, final in staged:
            os.replace(tmp, final)
            renamed += 1
        _fsync_folder(root)
    except BaseException as exc:  # a signal (Terminated, KeyboardInterrupt) too: no temporary file stays
        for tmp, _ in staged[renamed:]:
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise write_error(staged[-1][1] if staged else root, exc, error) from None
        raise
    return [final for _, final in staged]


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(final: str | Path, content: Content, error: type[MarketcastError] = MarketcastError,
                 mode: int | None = None) -> Path:
    """One file, atomically (see :func:`write_files`)."""
    final = Path(final)
    return write_files(final.parent, {final.name: content}, error, mode)[0]


def _take(lock: Path, what: str) -> int:
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise write_error(lock, exc, StateError, "cannot create the lock file") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            by = f" (pid {holder})" if holder.isdigit() else ""
            raise StateError(f"{what} is being written by another marketcast process{by}; wait for it to finish "
                             "or choose another folder") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the holder before removed it as we opened it: lock the file the path names now


@contextmanager
def exclusive(lock: Path, what: str) -> Iterator[None]:
    """Hold ``lock`` (created if need be) with an exclusive ``flock`` for the block, or raise a StateError naming
    ``what`` when another process holds it; the file is removed at the end. The lock is taken on the file the
    path still names (a holder that just removed it leaves the next one a fresh file), so removing it is safe."""
    fd = None
    try:
        with shielded():  # a signal between the open and the try would leave the file behind
            fd = _take(lock, what)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as exc:  # a full disk or a quota: the line names the lock file, not just the errno
            raise write_error(lock, exc, StateError, "cannot write the lock file") from None
        yield
    finally:
        if fd is not None:  # never the file of the process that refused us
            try:
                os.unlink(lock)
            except OSError:
                pass
            os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where that is not available."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False  # an old kernel, or a filesystem without the flag: two renames instead
    raise OSError(code, os.strerror(code), str(b))


class OutputFolder:
    """The staging folder of :func:`output_folder`: write into :attr:`path`, then :meth:`commit`."""

    def __init__(self, dest: Path, path: Path, error: type[MarketcastError], latest: bool = False) -> None:
        self.dest, self.path, self.error, self.latest = dest, path, error, latest
        self.committed = False

    def commit(self) -> None:
        """Put the staged folder in place of ``dest``: one atomic swap where the OS has it, else the old folder
        renamed away and the new one in (for a moment no folder, never a mix); the old one is then removed."""
        try:
            if not self.dest.exists():
                os.rename(self.path, self.dest)
            elif not _exchange(self.path, self.dest):  # else self.path now holds the old contents
                old = self.path.with_name(f"{self.path.name[:-len('.tmp')]}.old.tmp")
                os.rename(self.dest, old)
                try:
                    os.rename(self.path, self.dest)
                except BaseException:
                    os.rename(old, self.dest)
                    raise
                shutil.rmtree(old, ignore_errors=True)
            self.committed = True
            if self.latest:
                _point_latest(self.dest.parent, self.dest.name)
            _fsync_folder(self.dest.parent)
        except OSError as exc:
            raise write_error(self.dest, exc, self.error, "cannot put the new folder in place") from None
        finally:
            shutil.rmtree(self.path, ignore_errors=True)


def new_run_id(prefix: str) -> str:
    """``<prefix>-<UTC time>-<random>``: sortable by start time, unique across processes; it names the run in the
    run store and its folder under the output root."""
    return f"{prefix}-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:4]}"


LATEST = "latest"  # the link in an output root to the run folder written last


def _point_latest(root: Path, name: str) -> None:
    """``root/latest`` -> ``name`` (relative, so the root can move): a fresh link renamed over the old one."""
    tmp = root / f".{LATEST}.{uuid.uuid4().hex[:8]}.link"
    os.symlink(name, tmp)
    try:
        os.replace(tmp, root / LATEST)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def check_root(root: str | Path, what: str) -> Path:
    """Before any work: ``root`` can hold run folders (:func:`check_writable`) and its ``latest``, if any, is our
    link (a real file or folder of that name is never replaced); else one :class:`StateError` line."""
    path = check_writable(root, what)
    latest = path / LATEST
    if os.path.lexists(latest) and not latest.is_symlink():
        raise StateError(f"{what} {path}: holds {LATEST}, which is not the link marketcast keeps to the newest run "
                         "folder; move it away or choose another folder")
    return path


def _remove_dead_stages(root: Path) -> None:
    """The hidden folders of writers killed by SIGKILL: a stage whose lock no one holds."""
    for stage in root.glob(".*.tmp"):
        found = re.fullmatch(r"\.(.+)\.[0-9a-f]{8}(?:\.old)?\.tmp", stage.name)
        if found is None or stage.is_symlink() or not stage.is_dir():
            continue
        name = found.group(1)
        try:
            with exclusive(root / f".{name}.lock", name):
                shutil.rmtree(stage, ignore_errors=True)
        except StateError:
            continue  # its writer is alive


@contextmanager
def run_folder(root: str | Path, run_id: str,
               error: type[MarketcastError] = MarketcastError) -> Iterator[OutputFolder]:
    """The folder ``root/<run_id>`` written all or nothing (:func:`output_folder`), and ``root/latest`` pointed at
    it on :meth:`OutputFolder.commit`."""
    if not run_id or os.sep in run_id or run_id.startswith("."):
        raise error(f"{run_id!r} cannot name a run folder")
    root = Path(os.path.abspath(Path(root).expanduser()))
    new = not os.path.lexists(root)
    make_folder(root, error)
    _remove_dead_stages(root)
    out = None
    try:
        with output_folder(root / run_id, error, latest=True) as out:
            yield out
    finally:
        if new and not (out is not None and out.committed):
            _remove_made_root(root)


def _remove_made_root(root: Path) -> None:
    """A root made for a run that failed goes with it, with the shared files written for its pages (the Plotly
    file); a root where another run began meanwhile (a folder, a hidden stage or lock) stays."""
    try:
        left = list(root.iterdir())
        if all(p.is_file() and not p.is_symlink() and not p.name.startswith(".") for p in left):
            shutil.rmtree(root)
    except OSError:
        pass


@contextmanager
def output_folder(dest: str | Path, error: type[MarketcastError] = MarketcastError,
                  latest: bool = False) -> Iterator[OutputFolder]:
    """An exclusive, all-or-nothing write of the folder ``dest`` (see the module docstring): the block writes
    into ``.path`` and calls ``.commit()`` last; if it does not, ``dest`` stays as it was. The new folder holds
    only what the block wrote. ``latest``: the commit points ``<dest's parent>/latest`` at ``dest``."""
    dest = Path(os.path.abspath(Path(dest).expanduser()))
    if dest.is_symlink():
        dest = dest.resolve()
    if not dest.name:
        raise error(f"{dest} cannot be an output folder; choose a folder of its own")
    refuse_special(dest)
    if dest.exists() and not dest.is_dir():
        raise error(f"{dest} exists and is not a folder; choose another output folder")
    parent = make_folder(dest.parent, error)
    with exclusive(parent / f".{dest.name}.lock", f"{dest}"):
        for leftover in glob.glob(os.path.join(glob.escape(str(parent)), f".{glob.escape(dest.name)}.*.tmp")):
            shutil.rmtree(leftover, ignore_errors=True)  # of a writer killed by SIGKILL; no one else writes now
        stage = parent / f".{dest.name}.{uuid.uuid4().hex[:8]}.tmp"
        folder = OutputFolder(dest, stage, error, latest)
        try:  # one try from before the folder exists: a signal at any point removes it
            try:
                stage.mkdir()
                if dest.is_dir():
                    os.chmod(stage, dest.stat().st_mode & 0o7777)
            except OSError as exc:
                raise write_error(stage, exc, error, "cannot create the folder") from None
            try:
                yield folder
            except MarketcastError as exc:  # its line names the file the user asked for, not the hidden folder
                if str(stage) not in str(exc):
                    raise
                raise type(exc)(str(exc).replace(str(stage), str(dest))) from None
        finally:
            if not folder.committed:
                shutil.rmtree(stage, ignore_errors=True)
