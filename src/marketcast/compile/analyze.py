"""Explain recompilation from a ``TORCH_LOGS=recompiles`` (and ``graph_breaks``) log.

Reads what torch 2.13 prints (checked by running it), with or without the glog prefix
(``V1122 02:37:01.782000 3965 torch/_dynamo/guards.py:5396] [0/1] [__recompiles] ...``):

* ``Recompiling function F in FILE:LINE`` + ``triggered by the following guard failure(s):`` + ``- 0/7: guard``
* ``torch._dynamo hit config.recompile_limit (8)`` + ``function: 'F' (FILE:LINE)`` + ``last reason: 0/7: guard``
* ``Graph break in user code at FILE:LINE`` + ``Graph Break Reason: ...``
* ``skipping cudagraphs due to REASON (N instances)``
* ``accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run``
* ``Detected recompile when torch.compile stance is 'fail_on_recompile'``

Events are grouped by frame and normalised guard (digits -> ``N``), each group classified into a cause
with a concrete fix. The first guard listed under a recompile is the one that failed against the newest
cache entry; it is taken as that recompile's cause.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from marketcast.errors import ConfigError

_PREFIX = re.compile(
    r"^[VDIWEC]\d{4}\s+\d{2}:\d{2}:\d{2}(?:\.\d+)?\s+(?:\d+\s+)?(?:\S+:\d+\]\s?)?"  # glog head
    r"(?:\[[\d/_!]+\]\s?)?"  # compile id [0/8]
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
_CG_SKIP = re.compile(r"skipping cudagraphs due to (?P<reason>.+?)(?: \((?P<n>\d+) instances\))?(?:\.\s*Found from.*)?\s*$")
_CG_OVERWRITE = re.compile(r"accessing tensor output of CUDAGraphs that has been overwritten")
_STANCE = re.compile(r"Detected recompile when torch\.compile stance is 'fail_on_recompile'")

FIXES = {
    "int_guard_cache_position": (
        "Python int guard on a cache position: keep the position in a tensor (a position buffer, "
        "index_copy_ at a tensor index) or use a static, preallocated KV cache so the graph never sees the int"
    ),
    "int_guard_layer_index": (
        "Python int guard on a layer index: one compiled graph per layer value; give each layer its own cache "
        "module (or pass the index as a tensor) instead of branching on an int argument"
    ),
    "int_guard": (
        "Python scalar baked into the graph: pass it as a tensor, make it a constant, or mark it "
        "torch._dynamo.mark_dynamic / dynamic=True if it must vary"
    ),
    "size_mismatch": (
        "input size changes between calls: bucket/pad inputs to a few fixed shapes (context, batch, samples), "
        "or torch._dynamo.mark_dynamic(tensor, dim) on the dimension that varies"
    ),
    "dtype_device_mismatch": "dtype/device/grad mode changes between calls: fix them (same dtype, device, no_grad)",
    "object_identity": (
        "guard on an object's identity: a new module/closure/dict each call; build the compiled callable once "
        "and keep the objects it reads"
    ),
    "mutated_inputs": (
        "graph inputs mutated in place (e.g. KV cache tensors) block CUDA graphs: make them static buffers "
        "(register_buffer + torch._dynamo.mark_static_address) written with index_copy_ at a tensor position"
    ),
    "item_call": (
        ".item()/data-dependent Python value: keep the value on device (tensor ops, torch.where) instead of "
        "reading it into Python"
    ),
    "cudagraph_overwritten": (
        "an output of one CUDA-graph replay used after the next: clone outputs that outlive the call, call "
        "torch.compiler.cudagraph_mark_step_begin() per step, or compile one fixed-shape step function"
    ),
    "fail_on_recompile": (
        "a recompile after warm-up was refused (fail_on_recompile stance): the warm-up did not cover this shape "
        "or value; see the guard of the matching recompile"
    ),
    "cpu_tensor": "CUDA graphs need every graph input on the GPU: move the CPU tensor (or scalar tensor) to CUDA",
    "unsupported_op": (
        "graph break on an untraceable call (print, logging, unsupported builtin or library call): move it out "
        "of the compiled function or wrap it in torch.compiler.disable"
    ),
    "other": "inspect the guard with TORCH_LOGS=recompiles_verbose and remove what varies between calls",
}


def classify(text: str) -> str:
    """The cause of a guard failure, graph-break reason or CUDA-graph skip, one of :data:`FIXES`."""
    t = text.strip()
    low = t.lower()
    if "item()" in low or "capture_scalar_outputs" in low or "data-dependent" in low or "data dependent" in low:
        return "item_call"
    if "mutated inputs" in low or "mutation" in low:
        return "mutated_inputs"
    if "overwritten by a subsequent run" in low:
        return "cudagraph_overwritten"
    if "cpu device" in low or "non-cuda" in low:
        return "cpu_tensor"
    if "size mismatch" in low or "stride mismatch" in low or re.search(r"\.size\(\)|\bsize\(\)|len\(|numel", low):
        return "size_mismatch"
    if re.search(r"(dtype|device|requires_grad|grad_mode|dispatch key set) mismatch|grad_mode", low):
        return "dtype_device_mismatch"
    if "check_obj_id" in low or "id_match" in low or "___check_type_id" in low:
        return "object_identity"
    m = re.match(r"^(?P<lhs>.+?)\s*(==|!=|<=|>=|<|>)\s*-?\d+\b", t)
    if m:
        lhs = m["lhs"].lower()
        if "layer" in lhs:
            return "int_guard_layer_index"
        if re.search(r"cache|pos|offset|idx|seq|step|start", lhs):
            return "int_guard_cache_position"
        return "int_guard"
    if re.search(r"failed to trace|unsupported|not supported|skip", low):
        return "unsupported_op"
    return "other"


def normalise(text: str) -> str:
    """Guard text without its trailing source comment, digits replaced by ``N`` (groups ``== 0``, ``== 1``)."""
    text = re.split(r"\s{2,}#\s", text.strip(), maxsplit=1)[0].strip()
    return re.sub(r"\d+", "N", text)


@dataclass
class Group:
    """One (frame, cause) group of events."""

    kind: str  # recompile | recompile_limit | graph_break | cudagraph_skip | cudagraph_overwritten | stance_refusal
    function: str | None
    location: str | None
    pattern: str
    cause: str
    count: int = 0
    instances: int = 0  # cudagraph skips: the "(N instances)" sum
    limit: int | None = None
    example: str = ""
    fix: str = ""


@dataclass
class Analysis:
    source: str
    lines: int
    groups: list[Group] = field(default_factory=list)

    def total(self, kind: str) -> int:
        return sum(g.count for g in self.groups if g.kind == kind)

    def totals(self) -> dict[str, int]:
        kinds = ("recompile", "recompile_limit", "graph_break", "cudagraph_skip", "cudagraph_overwritten",
                 "stance_refusal")
        return {k: self.total(k) for k in kinds}

    def causes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for g in self.groups:
            out[g.cause] = out.get(g.cause, 0) + g.count
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "lines": self.lines,
            "totals": self.totals(),
            "causes": self.causes(),
            "fixes": {c: FIXES[c] for c in self.causes()},
            "groups": [asdict(g) for g in self.groups],
        }


def _strip(line: str) -> str:
    return _PREFIX.sub("", line.rstrip("\r\n"), count=1)


def analyze_text(text: str, source: str = "<text>") -> Analysis:
    """Parse a log's text into grouped events (see the module docstring for the formats)."""
    lines = [_strip(line) for line in text.splitlines()]
    groups: "OrderedDict[tuple, Group]" = OrderedDict()

    def add(kind, function, location, raw, cause=None, instances=0, limit=None) -> None:
        pattern = normalise(raw) if raw else ""
        cause = cause or classify(raw or "")
        key = (kind, function, location, pattern, limit)
        g = groups.get(key)
        if g is None:
            g = groups[key] = Group(kind, function, location, pattern, cause, limit=limit,
                                    example=re.split(r"\s{2,}#\s", raw.strip(), maxsplit=1)[0][:300] if raw else "", fix=FIXES[cause])
        g.count += 1
        g.instances += instances

    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        m = _RECOMPILING.search(line)
        if m:
            guard = None
            j = i + 1
            while j < n and _BLOCK_LINE.match(lines[j]):
                g = _GUARD.match(lines[j])
                if g and guard is None:
                    guard = g["guard"]
                j += 1
            add("recompile", m["fn"], f"{m['file']}:{m['line']}", guard or "(guard not shown)")
            i = j
            continue
        m = _LIMIT.search(line)
        if m:
            fn = loc = reason = None
            for j in range(i + 1, min(n, i + 8)):
                f = _FUNCTION.match(lines[j])
                if f and fn is None:
                    fn, loc = f["fn"], f"{f['file']}:{f['line']}"
                r = _LAST_REASON.match(lines[j])
                if r and reason is None:
                    reason = r["guard"]
            add("recompile_limit", fn, loc, reason or "(last reason not shown)", limit=int(m["n"]))
            i += 1
            continue
        m = _GRAPH_BREAK.search(line)
        if m:
            reason = None
            for j in range(i + 1, min(n, i + 12)):
                r = _GB_REASON.match(lines[j])
                if r:
                    reason = r["reason"].strip()
                    if reason.startswith("Encountered graph break when attempting to trace") or not reason:
                        detail = next((x.strip() for x in lines[j + 1 : j + 6] if x.strip()), "")
                        reason = f"{detail} ({reason.rstrip(':')})" if detail else reason
                    break
                if _GRAPH_BREAK.search(lines[j]):
                    break
            add("graph_break", None, f"{m['file']}:{m['line']}", reason or "(reason not shown)")
            i += 1
            continue
        m = _CG_SKIP.search(line)
        if m:
            add("cudagraph_skip", None, None, m["reason"], instances=int(m["n"] or 1))
        elif _CG_OVERWRITE.search(line):
            add("cudagraph_overwritten", None, None, line.strip(), cause="cudagraph_overwritten")
        elif _STANCE.search(line):
            add("stance_refusal", None, None, "recompile refused by fail_on_recompile", cause="fail_on_recompile")
        i += 1
    return Analysis(source=source, lines=len(lines), groups=list(groups.values()))


def analyze_file(path: str | Path) -> Analysis:
    """Analyze a log file; a missing, unreadable or binary file is a ConfigError (one line, exit 2)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: no such log file; capture one with TORCH_LOGS=recompiles CMD 2> recompile.log")
    try:
        text = p.read_text(errors="strict")
    except (UnicodeDecodeError, OSError) as exc:
        raise ConfigError(f"{p}: cannot be read as a text log ({type(exc).__name__})") from None
    return analyze_text(text, source=str(p))
