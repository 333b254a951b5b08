"""Compile counters of this process: compiles, recompiles, graph breaks, recompile-limit hits, CUDA-graph skips.

Read by the guarded steps, the trading loop's monitor and the compile toolkit; cheap to call.
"""

from __future__ import annotations

from typing import Mapping


class _CompileEvents:
    """Every dynamo compile start in this process, from ``torch._dynamo.callback_handler``.

    torch 2.13 keeps no ``counters["recompiles"]`` entry (it was removed), so recompiles are counted here:
    a compile whose id is ``frame/attempt`` with attempt > 0 recompiles an already compiled frame.
    """

    def __init__(self) -> None:
        self.compiles = 0
        self.recompiles = 0

    def _on_start(self, args) -> None:
        from torch._dynamo.callback import CallbackTrigger

        if getattr(args, "callback_trigger", None) is not CallbackTrigger.DYNAMO:
            return
        self.compiles += 1
        attempt = str(getattr(args, "compile_id", "")).split("/")[-1]
        if attempt.isdigit() and int(attempt) > 0:
            self.recompiles += 1

    def install(self) -> bool:
        """(Re-)register the hook; ``torch._dynamo.reset()`` clears all callbacks, so this is called often."""
        try:
            from torch._dynamo.callback import callback_handler
        except Exception:  # a torch without the hook: counters only
            return False
        if self._on_start not in callback_handler.start_callbacks:
            callback_handler.register_start_callback(self._on_start)
        return True


COMPILE_EVENTS = _CompileEvents()
COMPILE_EVENTS.install()


def _counter(group: str, match: str | None = None) -> int:
    from torch._dynamo.utils import counters

    if group not in counters:
        return 0
    return int(sum(v for k, v in counters[group].items() if match is None or match in str(k)))


def recompile_count() -> int:
    """Recompilations of already compiled frames in this process (all frames)."""
    COMPILE_EVENTS.install()
    return max(COMPILE_EVENTS.recompiles, _counter("recompiles"))


def compile_count() -> int:
    """Dynamo frame compilations (first compiles and recompiles) seen in this process."""
    COMPILE_EVENTS.install()
    return COMPILE_EVENTS.compiles


def graph_break_count() -> int:
    """Graph breaks dynamo has recorded in this process."""
    return _counter("graph_break")


def recompile_limit_hits() -> int:
    """Times a frame hit ``config.recompile_limit`` (dynamo then runs that frame eagerly)."""
    return _counter("unimplemented", "recompile limit")


def cudagraph_skip_count() -> int:
    """Graphs inductor compiled without CUDA graphs (``skipping cudagraphs due to ...``)."""
    return _counter("inductor", "cudagraph_skips")


def counters_snapshot() -> dict[str, int]:
    """The compile counters the stress harness diffs around a run."""
    return {
        "compiles": compile_count(),
        "recompiles": recompile_count(),
        "graph_breaks": graph_break_count(),
        "recompile_limit_hits": recompile_limit_hits(),
        "cudagraph_skips": cudagraph_skip_count(),
    }


def counters_delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    return {k: int(after[k]) - int(before.get(k, 0)) for k in after}
