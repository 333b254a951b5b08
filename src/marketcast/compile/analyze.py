"""Explain recompilation from ``TORCH_LOGS=recompiles,graph_breaks`` logs: one file, several, or a folder.

The events (:mod:`marketcast.compile.logevents`) are grouped across files by kind, place and pattern (what a
guard or reason says, see :mod:`marketcast.compile.causes`), most severe kind first, each with its cause, fix,
and, for a frame that now runs eager, what happens to it.

A compressed log (gzip, xz: the standard library reads them) is read as its text, known by its magic bytes,
not its name; a zstd one (no zstd reader is a dependency) and any other binary file are refused with one line,
so a log stored compressed is never reported as "0 recompiles".
"""

from __future__ import annotations

import gzip
import lzma
import zlib
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from marketcast.compile.causes import FIXES, describe_values
from marketcast.compile.logevents import KINDS, Event, parse_events
from marketcast.errors import ConfigError, first_line

EFFECTS = {
    "frame_skipped": "dynamo skipped this frame: it runs eager on every call, nothing in it is compiled",
    "recompile_limit": ("the frame keeps its {limit} compiled entries for inputs they match; every other shape "
                        "or value now runs this frame eager, without compiling (fullgraph=True raises instead)"),
    "stance_refusal": "the recompile was refused; marketcast's GuardedCompile sent the model to eager for good",
}


@dataclass
class Group:
    """Events of one kind at one place with one pattern, across all files read."""

    kind: str  # one of KINDS
    function: str | None
    location: str | None
    pattern: str  # the guard or reason, normalised (digits -> N, a tensor's dimension kept)
    cause: str  # a key of causes.FIXES
    count: int = 0
    instances: int = 0  # cudagraph skips: the "(N instances)" sum
    limit: int | None = None
    values: list[str] = field(default_factory=list)  # distinct sizes, ints or types named by the guards
    example: str = ""  # the first guard or reason as logged (without its source comment)
    context: str = ""  # the first source comment / torch HINT / secondary reason: shown, never classified
    detail: str = ""  # what the values say (which dimension varies, and how)
    effect: str = ""  # what happens to the frame (skipped, limit hit), empty otherwise
    fix: str = ""
    sources: dict[str, int] = field(default_factory=dict)  # file -> events from it


@dataclass(frozen=True)
class LogSource:
    path: str
    lines: int
    undecodable: int  # byte sequences that were not UTF-8, replaced by U+FFFD


@dataclass
class Analysis:
    sources: list[LogSource] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)

    @property
    def lines(self) -> int:
        return sum(s.lines for s in self.sources)

    @property
    def undecodable(self) -> int:
        return sum(s.undecodable for s in self.sources)

    def total(self, kind: str) -> int:
        return sum(g.count for g in self.groups if g.kind == kind)

    def totals(self) -> dict[str, int]:
        return {k: self.total(k) for k in KINDS}

    def causes(self) -> dict[str, dict[str, int]]:
        """cause -> {kind: events}, largest cause first; every event is counted once, under its own kind."""
        out: dict[str, dict[str, int]] = {}
        for g in self.groups:
            per_kind = out.setdefault(g.cause, {})
            per_kind[g.kind] = per_kind.get(g.kind, 0) + g.count
        return dict(sorted(out.items(), key=lambda kv: -sum(kv[1].values())))

    def to_dict(self) -> dict:
        return {
            "sources": [asdict(s) for s in self.sources],
            "lines": self.lines,
            "undecodable": self.undecodable,
            "events": sum(self.totals().values()),
            "totals": self.totals(),
            "causes": {c: {"counts": n, "fix": FIXES[c]} for c, n in self.causes().items()},
            "groups": [asdict(g) for g in self.groups],
        }


def _add(groups: "OrderedDict[tuple, Group]", event: Event, source: str) -> None:
    # a CUDA-graph skip names a place only for some reasons (the first mutation's stack): its reason groups it
    key = (event.kind, None if event.kind == "cudagraph_skip" else event.location, event.pattern, event.limit)
    g = groups.get(key)
    if g is None:
        g = groups[key] = Group(event.kind, event.function, event.location, event.pattern, event.cause,
                                limit=event.limit, example=event.example, context=event.context,
                                fix=FIXES[event.cause],
                                effect=EFFECTS.get(event.kind, "").format(limit=event.limit))
    g.function = g.function or event.function
    g.location = g.location or event.location
    g.context = g.context or event.context
    g.count += 1
    g.instances += event.instances
    g.values += [v for v in event.values if v not in g.values]
    g.sources[source] = g.sources.get(source, 0) + 1


def _analyze(logs: Iterable[tuple[str, str, int]]) -> Analysis:
    """Group the events of ``(source, text, undecodable)`` logs together."""
    groups: "OrderedDict[tuple, Group]" = OrderedDict()
    sources = []
    for source, text, undecodable in logs:
        for event in parse_events(text):
            _add(groups, event, source)
        sources.append(LogSource(source, len(text.splitlines()), undecodable))
    out = list(groups.values())
    for g in out:
        g.detail = describe_values(g.pattern, g.values)
    return Analysis(sources, sorted(out, key=lambda g: (list(KINDS).index(g.kind), -g.count)))


def analyze_text(text: str, source: str = "<text>") -> Analysis:
    """Parse one log's text into grouped events."""
    return _analyze([(source, text, 0)])


# magic bytes -> (format, decompress, its errors); zstd's frame magic: RFC 8878 section 3.1.1
COMPRESSED = {b"\x1f\x8b": ("gzip", gzip.decompress, (OSError, EOFError, zlib.error)),
              b"\xfd7zXZ\x00": ("xz", lzma.decompress, (lzma.LZMAError, EOFError)),
              b"\x28\xb5\x2f\xfd": ("zstd", None, ())}  # no zstd reader installed: refused
SNIFF = 8000  # bytes looked at for a NUL, as git's binary check does (buffer_is_binary, xdiff-interface.c)


def _decompressed(path: Path, data: bytes) -> bytes:
    """``data`` itself, or its decompressed bytes when it starts with a compression format's magic bytes (the
    name is not trusted: ``recompile.log`` may be gzip'd, ``x.gz`` may be plain)."""
    for magic, (name, decompress, errors) in COMPRESSED.items():
        if data.startswith(magic):
            if decompress is None:
                raise ConfigError(f"{path}: a {name}-compressed log, which marketcast cannot read; decompress it "
                                  f"first (zstd -d {path.name}) and pass the plain log, or compress it with gzip")
            try:
                return decompress(data)
            except errors as exc:
                raise ConfigError(f"{path}: a damaged {name} file ({first_line(exc)}); compress the log again or "
                                  "pass it uncompressed") from None
    return data


def read_log(path: Path) -> tuple[str, int]:
    """A log's text with undecodable bytes replaced (``2>&1 | tee`` captures can hold some), and their count.
    Compressed logs are decompressed; a NUL byte near the start (no text log has one) marks another binary
    file, refused instead of read as a log without events."""
    data = _decompressed(path, path.read_bytes())
    nul = data.find(b"\x00", 0, SNIFF)
    if nul >= 0:
        raise ConfigError(f"{path}: binary data, not a text log (byte {nul} is NUL); pass the "
                          "TORCH_LOGS=recompiles,graph_breaks capture itself, plain or compressed with gzip or xz")
    text = data.decode("utf-8", errors="replace")
    return text, text.count("\ufffd") - data.count("\ufffd".encode())


def log_files(paths: Sequence[str | Path]) -> list[Path]:
    """The files to read: each path given, a folder's files (recursively, hidden ones skipped), in order."""
    files: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file()
                           and not any(part.startswith(".") for part in f.relative_to(p).parts))
            if not found:
                raise ConfigError(f"{p}: folder holds no log files; put TORCH_LOGS captures in it or pass files")
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise ConfigError(f"{p}: no such log file or folder; capture one with "
                              "TORCH_LOGS=recompiles,graph_breaks CMD 2> recompile.log")
    return list(dict.fromkeys(files))


def analyze_paths(paths: Sequence[str | Path]) -> Analysis:
    """Analyze logs (files and/or folders) together: groups span files; a bad path is a ConfigError."""
    if not paths:
        raise ConfigError("give at least one log file or folder")

    def read_all():
        for path in log_files(paths):
            try:
                text, undecodable = read_log(path)
            except OSError as exc:
                raise ConfigError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__})") from None
            yield str(path), text, undecodable

    return _analyze(read_all())


def analyze_file(path: str | Path) -> Analysis:
    """One log file or folder (see :func:`analyze_paths`)."""
    return analyze_paths([path])
