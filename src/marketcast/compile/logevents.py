"""The events in a ``TORCH_LOGS=recompiles,graph_breaks`` log, as torch 2.13 prints them.

Checked on logs of toto-ts and upstream Kronos, with or without the glog prefix
(``V1122 02:37:01.782000 3965 torch/_dynamo/guards.py:5396] [0/1] [__recompiles] ...``):

* ``Recompiling function F in FILE:LINE`` + ``triggered by the following guard failure(s):`` + ``- 0/7: guard``
  (the first guard listed failed against the newest cache entry: it is taken as the cause)
* ``torch._dynamo hit config.recompile_limit (8)`` + ``function: 'F' (FILE:LINE)`` + ``last reason: 0/7: guard``
* ``Graph break in user code at FILE:LINE`` + ``Graph Break Reason: ...``; a reason that starts with
  ``Failed to handle graph break gracefully`` means dynamo skipped the whole frame (it runs eager): its own
  kind, ``frame_skipped``, with the cause read from the lines that follow
* ``skipping cudagraphs due to REASON (N instances)`` / ``disabling cudagraphs due to incompatible op ...``
* ``accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run``
* ``Detected recompile when torch.compile stance is 'fail_on_recompile'`` (the exception text, as logged)

Every event belongs to exactly one kind, so counts add up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from marketcast.compile.causes import (
    classify_cudagraph,
    classify_guard,
    classify_reason,
    guard_pattern,
    normalise,
    split_guard,
)

# kind -> what its events are called; most severe first: what makes code run eager, then what costs
# compile time, then what costs speed
KINDS = {
    "frame_skipped": "frames skipped",
    "recompile_limit": "recompile-limit hits",
    "stance_refusal": "refused recompiles",
    "cudagraph_overwritten": "overwritten CUDA-graph outputs",
    "recompile": "recompiles",
    "cudagraph_skip": "CUDA-graph skips",
    "graph_break": "graph breaks",
}

_PREFIX = re.compile(
    r"^(?:[VDIWEC]\d{4}\s+\d{2}:\d{2}:\d{2}(?:\.\d+)?\s+(?:\d+\s+)?(?:\S+:\d+\]\s?)?)?"  # glog head
    r"(?:\[(?P<cid>[\d/_!]+)\]\s?)?"  # compile id [0/8]
    r"(?:\[__\w+\]\s?)?"  # artifact [__recompiles]
)
_RECOMPILING = re.compile(r"Recompiling function (?P<fn>\S+) in (?P<file>.+?):(?P<line>\d+)\s*$")
_GUARD = re.compile(r"^\s*-\s+(?P<id>\d+/\d+):\s+(?P<guard>.*)$")
_BLOCK_LINE = re.compile(r"^\s*(?:$|-|triggered by the following guard failure|guard \d+ failures:)")
_LIMIT = re.compile(r"hit config\.(?P<kind>\w*(?:recompile|cache_size)_limit) \((?P<n>\d+)\)")
_FUNCTION = re.compile(r"^\s*function: '(?P<fn>[^']+)' \((?P<file>.+?):(?P<line>\d+)\)")
_LAST_REASON = re.compile(r"^\s*last reason: (?:(?P<id>\d+/\d+):\s*)?(?P<guard>.*)$")
_GRAPH_BREAK = re.compile(r"Graph break (?:\(.*?\) )?in user code at (?P<file>.+?):(?P<line>\d+)\s*$")
_GB_REASON = re.compile(r"^\s*Graph Break Reason:\s*(?P<reason>.*)$")
_GB_HEADER = re.compile(r"^(?:Encountered graph break when attempting to trace|Failed to handle graph break "
                        r"gracefully|Graph break encountered)")
_SKIPPED_FRAME = re.compile(r"frame skipped: (?P<fn>\S+) \((?P<file>.+?) line (?P<line>\d+)\)")
_ANOTHER = re.compile(r"While handling this graph break, another graph break occurred")
_TRACE_FILE = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)')
_CG_SKIP = re.compile(r"(?:skipping|disabling) cudagraphs? due to (?P<reason>.+)$")
_CG_OVERWRITE = re.compile(r"accessing tensor output of CUDAGraphs that has been overwritten")
_STANCE = re.compile(r"Detected recompile when torch\.compile stance is 'fail_on_recompile'")
_HEADERS = (_RECOMPILING, _LIMIT, _GRAPH_BREAK, _CG_SKIP, _CG_OVERWRITE, _STANCE)


@dataclass(frozen=True)
class Event:
    kind: str
    function: str | None
    location: str | None
    pattern: str
    cause: str
    values: tuple[str, ...] = ()
    example: str = ""
    context: str = ""
    instances: int = 0
    limit: int | None = None


def _strip(line: str) -> tuple[str | None, str]:
    m = _PREFIX.match(line)
    return m["cid"], line[m.end():].rstrip("\r\n")


def _guard_event(kind: str, fn, loc, raw: str | None, limit: int | None = None) -> Event:
    if not raw:
        return Event(kind, fn, loc, "(guard not shown)", "other", limit=limit)
    guard = split_guard(raw)
    pattern, values = guard_pattern(guard.expression)
    context = " ".join(x for x in (guard.context, f"(HINT: {guard.hint})" if guard.hint else "") if x)
    return Event(kind, fn, loc, pattern, classify_guard(guard.expression, guard.hint), tuple(values),
                 guard.expression[:300], context[:300], limit=limit)


def _first_real_line(lines: Sequence[tuple[str | None, str]], start: int, stop: int) -> str:
    """The first line in [start, stop) that is neither blank nor a graph-break header."""
    for j in range(start, stop):
        text = lines[j][1].strip()
        if text and not _GB_HEADER.match(text):
            return text
    return ""


def _graph_break_event(lines, i: int, end: int, m: re.Match) -> Event:
    """A graph break, or a skipped frame when dynamo could not resume from it; the cause is the first real
    line of the reason (the header lines only say where tracing stopped)."""
    loc = f"{m['file']}:{m['line']}"
    reason = secondary = ""
    skipped = False
    skipped_frame = None
    for j in range(i + 1, end):
        text = lines[j][1]
        r = _GB_REASON.match(text)
        if r and not reason:
            head = r["reason"].strip()
            skipped = head.startswith("Failed to handle graph break gracefully")
            reason = _first_real_line(lines, j + 1, end) if not head or _GB_HEADER.match(head) else head
        elif _ANOTHER.search(text) and not secondary:
            secondary = _first_real_line(lines, j + 1, end)
        elif skipped_frame is None:
            skipped_frame = _SKIPPED_FRAME.search(text)
    traced = [t["fn"] for t in (_TRACE_FILE.match(lines[j][1]) for j in range(i + 1, end)) if t]
    fn = traced[-1] if traced else None  # the innermost frame of the user traceback is listed last
    if skipped and skipped_frame is not None:
        fn, loc = skipped_frame["fn"], f"{skipped_frame['file']}:{skipped_frame['line']}"
    reason = reason or "(reason not shown)"
    kind = "frame_skipped" if skipped else "graph_break"
    return Event(kind, fn, loc, normalise(reason)[:300], classify_reason(reason), (), reason[:300],
                 f"then: {secondary}" if secondary else "")


def _cudagraph_event(lines, i: int, end: int, reason: str) -> Event:
    while (inner := _CG_SKIP.search(reason)) is not None:  # "skipping ... due to skipping ... due to X"
        reason = inner["reason"]
    reason = re.split(r"\.?\s*Found from", reason, maxsplit=1)[0].strip()
    n = re.search(r"\s*\((?P<n>\d+) instances\)$", reason)
    instances = int(n["n"]) if n else 1
    reason = reason[: n.start()] if n else reason
    loc = fn = None
    for j in range(i + 1, end):
        t = _TRACE_FILE.match(lines[j][1])
        if t:
            loc, fn = f"{t['file']}:{t['line']}", t["fn"]
            break
    return Event("cudagraph_skip", fn, loc, normalise(reason), classify_cudagraph(reason), (), reason[:300],
                 instances=instances)


def _event_end(lines, i: int) -> int:
    """Index after the last line of the event starting at ``i``: same compile id, no new event header."""
    cid = lines[i][0]
    cap = 400 if cid is not None else 60
    j = i + 1
    while j < min(len(lines), i + cap):
        other, text = lines[j]
        if (cid is not None and other != cid) or any(h.search(text) for h in _HEADERS):
            break
        j += 1
    return j


def _guard_block(lines, j: int) -> tuple[str | None, int]:
    """The first guard of a ``triggered by the following guard failure(s):`` block at ``j``, and its end."""
    guard = None
    while j < len(lines) and _BLOCK_LINE.match(lines[j][1]):
        g = _GUARD.match(lines[j][1])
        if g and guard is None:
            guard = g["guard"]
        j += 1
    return guard, j


def _limit_event(lines, i: int, m: re.Match) -> Event:
    fn = loc = reason = None
    for j in range(i + 1, min(len(lines), i + 8)):
        f = _FUNCTION.match(lines[j][1])
        if f and fn is None:
            fn, loc = f["fn"], f"{f['file']}:{f['line']}"
        r = _LAST_REASON.match(lines[j][1])
        if r and reason is None:
            reason = r["guard"]
    return _guard_event("recompile_limit", fn, loc, reason, limit=int(m["n"]))


def _stance_event(lines, i: int) -> tuple[Event, int]:
    """A refused recompile; torch puts the frame and the failed guards in the exception text."""
    where = re.search(r"filename: '(?P<file>[^']+)', function name: '(?P<fn>[^']+)', line number: (?P<line>\d+)",
                      lines[i][1])
    guard, end = _guard_block(lines, i + 1)
    fn, loc = (where["fn"], f"{where['file']}:{where['line']}") if where else (None, None)
    if guard is None:
        return Event("stance_refusal", fn, loc, "recompile refused by fail_on_recompile", "fail_on_recompile",
                     example=lines[i][1].strip()[:300]), end
    return _guard_event("stance_refusal", fn, loc, guard), end


def parse_events(text: str) -> list[Event]:
    """Every event in a log's text, in order (see the module docstring for the formats).

    torch logs ``Recompiling function`` for the attempt that then hits the recompile limit (same compile id):
    that attempt compiled nothing, so it is counted as the limit hit only.
    """
    # replacement characters (undecodable bytes, counted by read_log) carry nothing and would break a match
    lines = [_strip(line) for line in text.replace("\ufffd", "").splitlines()]
    events: list[tuple[str | None, Event]] = []
    i, n = 0, len(lines)
    while i < n:
        cid, line = lines[i]
        end = i + 1
        if m := _RECOMPILING.search(line):
            guard, end = _guard_block(lines, i + 1)
            event = _guard_event("recompile", m["fn"], f"{m['file']}:{m['line']}", guard)
        elif m := _LIMIT.search(line):
            event = _limit_event(lines, i, m)
            if events and events[-1][1].kind == "recompile" and (
                    events[-1][0] == cid if cid is not None else events[-1][1].location == event.location):
                events.pop()
        elif m := _GRAPH_BREAK.search(line):
            end = _event_end(lines, i)
            event = _graph_break_event(lines, i, end, m)
        elif m := _CG_SKIP.search(line):
            event = _cudagraph_event(lines, i, _event_end(lines, i), m["reason"])
        elif _CG_OVERWRITE.search(line):
            event = Event("cudagraph_overwritten", None, None, "output overwritten by a subsequent replay",
                          "cudagraph_overwritten", example=line.strip()[:300])
        elif _STANCE.search(line):
            event, end = _stance_event(lines, i)
        else:
            i += 1
            continue
        events.append((cid, event))
        i = max(end, i + 1)
    return [e for _, e in events]
