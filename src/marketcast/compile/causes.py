"""What a guard failure, graph-break reason or CUDA-graph skip means, and how to fix it.

A guard line in a recompile log reads ``EXPRESSION   # source line  # file:line in fn (HINT: ...)``. Only the
expression (and torch's own HINT) is classified: the trailing source comment is the line dynamo was tracing
when it installed the guard, often unrelated to what the guard checks (``layer_idx == 0`` installed at
``seq_pos_offset = kv_cache.seq_len(layer_idx)``), so it is kept as context and never read for the cause.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FIXES = {
    "type_guard": (
        "an argument is None on some calls and a tensor on others (or changes type): pass a consistent type "
        "(e.g. always a mask tensor, or always None), or compile the variants as separate functions"
    ),
    "query_length": (
        "the query length differs between prefill (the whole prompt) and decode (one step): compile prefill "
        "and decode as separate functions, each with its own fixed shape"
    ),
    "size_mismatch": (
        "an input dimension changes between calls (see which one and its values): bucket/pad inputs to a few "
        "fixed shapes, feed a fixed-length window instead of a growing one, or "
        "torch._dynamo.mark_dynamic(tensor, dim) on the dimension that varies"
    ),
    "int_guard_layer_index": (
        "Python int guard on a layer index: one compiled graph per layer value; give each layer its own cache "
        "module (or pass the index as a tensor) instead of branching on an int argument"
    ),
    "int_guard_cache_position": (
        "Python int guard on a cache position: keep the position in a tensor (a position buffer, "
        "index_copy_ at a tensor index) or use a static, preallocated KV cache so the graph never sees the int"
    ),
    "module_int_attribute": (
        "an int attribute of an nn.Module changes between calls (e.g. a Python-side cache length such as "
        "seq_len_cached): precompute for the maximum length once and slice, or keep the value in a tensor "
        "(torch._dynamo.config.allow_unspec_int_on_nn_module=True makes it dynamic instead)"
    ),
    "int_across_graph_break": (
        "a Python int computed before a graph break (often by .item()) is passed into the resumed frame and "
        "baked in: remove the graph break so the value stays a tensor inside one graph"
    ),
    "int_guard": (
        "Python scalar baked into the graph: pass it as a tensor, make it a constant, or mark it "
        "torch._dynamo.mark_dynamic / dynamic=True if it must vary"
    ),
    "dtype_device_mismatch": (
        "dtype, device, requires_grad or grad mode changes between calls: fix them (same dtype and device, "
        "always under torch.no_grad/inference_mode)"
    ),
    "object_identity": (
        "guard on an object's identity: a new module/closure/dict each call; build the compiled callable once "
        "and keep the objects it reads"
    ),
    "item_call": (
        ".item()/data-dependent Python value: keep the value on device (tensor ops, torch.where, a position "
        "tensor) instead of reading it into Python (capture_scalar_outputs=True only moves the problem)"
    ),
    "data_dependent_branch": (
        "an if on a tensor's value: make the code branchless (torch.where, clamp) or use torch.cond"
    ),
    "unsupported_op": (
        "graph break on an untraceable call (print, logging, unsupported builtin or library call): move it out "
        "of the compiled function or wrap it in torch.compiler.disable"
    ),
    "mutated_inputs": (
        "graph inputs mutated in place (e.g. KV cache tensors) block CUDA graphs: make them static buffers "
        "(register_buffer + torch._dynamo.mark_static_address) written with index_copy_ at a tensor position"
    ),
    "cpu_tensor": (
        "CUDA graphs need every graph input on the GPU: move the CPU tensor (often a 0-d position or scalar "
        "tensor) to CUDA before the call, or pass a Python constant"
    ),
    "dynamic_shapes": (
        "CUDA graphs record one graph per shape: compile with dynamic=False and bucket/pad inputs to a few fixed "
        "shapes (graphs with symbolic shapes are not captured, and too many shapes exceed the re-record limit)"
    ),
    "incompatible_op": (
        "an op CUDA graphs cannot capture (a CPU sync such as .item()/nonzero, boolean-mask index_put_, "
        "torch.cond/while_loop): replace it with a capture-safe op (torch.where, fixed-size indexing) or move "
        "it outside the compiled step"
    ),
    "cudagraph_overwritten": (
        "an output of one CUDA-graph replay used after the next: clone outputs that outlive the call, call "
        "torch.compiler.cudagraph_mark_step_begin() per step, or compile one fixed-shape step function"
    ),
    "fail_on_recompile": (
        "a recompile after warm-up was refused (fail_on_recompile stance): the warm-up did not cover this shape "
        "or value; see the guard of the matching recompile"
    ),
    "other": "inspect it with TORCH_LOGS=recompiles_verbose,graph_breaks and remove what varies between calls",
}


@dataclass(frozen=True)
class Guard:
    """One guard failure split into what dynamo checks and what the log adds around it."""

    expression: str  # what failed, e.g. "layer_idx == 1" (the only part classified)
    context: str = ""  # the trailing "# source line  # file:line in fn": shown, never classified
    hint: str = ""  # torch's own "(HINT: ...)"


_HINT = re.compile(r"\s*\(HINT: (?P<hint>.*)\)\s*$")
_COMMENT = re.compile(r"\s{2,}#\s")
_TYPE = re.compile(r"expected type of '(?P<name>.+?)' to be a tensor type,\s*'?\s*but found (?:<class '(?P<cls>[^']+)'>|(?P<other>.+))")
_TENSOR = re.compile(r"^tensor '(?P<name>.+)' (?P<what>size|stride) mismatch at index (?P<dim>\d+)\. "
                     r"expected (?P<expected>\S+), actual (?P<actual>\S+)$")
_TENSOR_OTHER = re.compile(r"^tensor '(?P<name>.+)' (?P<what>[\w ]+?) mismatch\. expected (?P<expected>[^,]+)"
                           r"(?:, actual (?P<actual>.+))?$")
_COMPARE = re.compile(r"^(?P<lhs>.+?)\s*(?P<op>==|!=|<=|>=|<|>)\s*(?P<rhs>-?\d+)$")
_COMPARE_REVERSED = re.compile(r"^(?P<rhs>-?\d+)\s*(?P<op>==|!=|<=|>=|<|>)\s*(?P<lhs>.+)$")
_DIGITS = re.compile(r"(?:size|stride)\(\)\[\d+\]|\d+")  # a dimension index says which dimension varies: kept


def split_guard(text: str) -> Guard:
    """``EXPR<padding>  # source  # file:line in fn (HINT: ...)`` -> :class:`Guard`."""
    text = text.strip()
    hint = ""
    m = _HINT.search(text)
    if m:
        hint, text = m["hint"], text[: m.start()]
    parts = _COMMENT.split(text, maxsplit=1)
    return Guard(parts[0].strip(), parts[1].strip() if len(parts) > 1 else "", hint)


def normalise(text: str) -> str:
    """Digits -> ``N`` (groups ``== 0`` with ``== 1`` and ``_modules['0']`` with ``['1']``), except a
    ``size()[d]``/``stride()[d]`` dimension, which is what the group is about."""
    return _DIGITS.sub(lambda m: "N" if m.group(0)[0].isdigit() else m.group(0), text.strip())


def guard_pattern(expression: str) -> tuple[str, list[str]]:
    """(what groups it, the values it names): a tensor guard keeps its name and dimension, a comparison its
    left side; the numbers and types that vary between events are returned as values."""
    m = _TENSOR.match(expression)
    if m:
        return f"tensor '{m['name']}' {m['what']} mismatch at index {m['dim']}", [m["expected"], m["actual"]]
    m = _TENSOR_OTHER.match(expression)
    if m:
        return f"tensor '{m['name']}' {m['what']} mismatch", [v for v in (m["expected"], m["actual"]) if v]
    m = _TYPE.search(expression)
    if m:
        found = m["cls"] or (m["other"] or "").strip()
        return f"expected type of '{m['name']}' to be a tensor type, but found {found}", [found]
    m = _COMPARE.match(expression) or _COMPARE_REVERSED.match(expression)
    if m:
        lhs = normalise(m["lhs"])
        side = f"{lhs} {m['op']} N" if m.re is _COMPARE else f"N {m['op']} {lhs}"
        return side, [m["rhs"]]
    return normalise(expression), []


def _leaf(lhs: str) -> str:
    """The last name of an attribute/subscript chain: ``kv_cache._current_idx[7]`` -> ``_current_idx``."""
    names = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", re.sub(r"\[[^\]]*\]", "", lhs))
    return names[-1] if names else lhs


def classify_guard(expression: str, hint: str = "") -> str:
    """The cause of a failed guard, from its expression (and torch's HINT) alone; one of :data:`FIXES`."""
    low = expression.lower()
    if "expected type of" in low or re.search(r"\bis (not )?none\b", low) or "type_mismatch" in low \
            or "___check_type_id" in low:
        return "type_guard"
    if re.search(r"(size|stride|rank) mismatch|\.size\(\)|\.stride\(\)|\blen\(|numel", low):
        return "size_mismatch"
    if re.search(r"(dtype|device|requires_grad|dispatch key set)[\w ]* mismatch|global_state|grad_mode", low):
        return "dtype_device_mismatch"
    if "___check_obj_id" in low or "id_match" in low:
        return "object_identity"
    m = _COMPARE.match(expression) or _COMPARE_REVERSED.match(expression)
    if m:
        leaf = _leaf(m["lhs"]).lower()
        if leaf.startswith("___stack"):
            return "int_across_graph_break"
        if "layer" in leaf:
            return "int_guard_layer_index"
        if "integer attributes of the nn.module" in hint.lower() or "._modules[" in m["lhs"]:
            return "module_int_attribute"
        if re.fullmatch(r"(q|query|seq|tgt|input|new|num)_?(len|length|tokens?)", leaf):
            return "query_length"
        if re.search(r"cache|pos|offset|idx|index|step|start|cur", leaf):
            return "int_guard_cache_position"
        return "int_guard"
    return "other"


def classify_reason(text: str) -> str:
    """The cause of a graph break (the reason line under ``Graph Break Reason``); one of :data:`FIXES`."""
    low = text.lower()
    if "item()" in low or "capture_scalar_outputs" in low or "_local_scalar_dense" in low:
        return "item_call"
    if "data-dependent branching" in low or "data dependent branching" in low:
        return "data_dependent_branch"
    return "unsupported_op"  # a graph break is, by definition, something dynamo could not trace


def classify_cudagraph(reason: str) -> str:
    """The cause of ``skipping cudagraphs due to REASON``; one of :data:`FIXES`."""
    low = reason.lower()
    if "mutated inputs" in low or "mutation" in low:
        return "mutated_inputs"
    if "cpu device" in low or "multiple devices" in low or "non-cuda" in low:
        return "cpu_tensor"
    if "symbolic shape" in low or "dynamic shape" in low or "re-recording limit" in low:
        return "dynamic_shapes"
    if "incompatible op" in low or "control flow operator" in low or "index_put_" in low or "sparsity" in low:
        return "incompatible_op"
    return "other"


def describe_values(pattern: str, values: list[str]) -> str:
    """One line on the values a group saw: which dimension took which sizes, which ints, which types."""
    if not values:
        return ""
    nums = [int(v) for v in values if re.fullmatch(r"-?\d+", v)]
    m = re.match(r"tensor '(?P<name>.+)' (?:size|stride) mismatch at index (?P<dim>\d+)", pattern)
    if m and len(nums) == len(values):
        text = f"dim {m['dim']} of '{m['name']}' took {', '.join(map(str, nums))}"
        steps = {b - a for a, b in zip(nums, nums[1:])}
        if len(nums) >= 3 and len(steps) == 1 and steps.pop() > 0:
            text += f" (grows by {nums[1] - nums[0]} each time: the input window grows every step)"
        elif sorted(set(nums))[0] == 1 and len(set(nums)) == 2 and m["dim"] != "0":
            text += " (1 vs the prompt length: looks like prefill vs decode; compile them as separate functions)"
        return text
    if all(v in pattern for v in values):
        return ""  # the pattern already names them (a type guard's type)
    return "values seen: " + ", ".join(values)
