"""What torch printed, counted straight from the raw text: the oracle the analyzer's counts must match."""

from __future__ import annotations

import re


def raw_counts(text: str) -> dict[str, int]:
    """How often each torch message occurs in the text."""
    return {
        "recompiling": text.count("Recompiling function"),
        "limit": text.count("hit config.recompile_limit"),
        "graph_break": len(re.findall(r"Graph break (?:\(user stack suppressed due to duplicate graph break\) )?"
                                      r"in user code at", text)),
        "skipped": text.count("Failed to handle graph break gracefully"),
    }


def where(group) -> str:
    return (group.location or "").split("site-packages/")[-1]


def assert_counts_add_up(analysis, text: str) -> None:
    raw, totals = raw_counts(text), analysis.totals()
    # the attempt that hits the limit is logged as "Recompiling" too, but compiles nothing: it is the limit hit
    assert totals["recompile"] + totals["recompile_limit"] == raw["recompiling"]
    assert totals["recompile_limit"] == raw["limit"]
    assert totals["graph_break"] + totals["frame_skipped"] == raw["graph_break"]
    assert totals["frame_skipped"] == raw["skipped"]
    assert sum(sum(per_kind.values()) for per_kind in analysis.causes().values()) == sum(totals.values())
    assert sum(g.count for g in analysis.groups) == sum(totals.values())
