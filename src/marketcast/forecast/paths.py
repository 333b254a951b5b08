"""Where a forecaster's sample paths come from, said once for the leaderboard and every report.

``joint``: the model draws close, high and low together (Toto 1.0, Kronos, the baseline). ``copula``: the model
predicts marginal quantiles and the paths join them by a Gaussian copula fitted to each context
(:mod:`marketcast.forecast.copula`): their bar ranges, and so MaxDiff's and take-profit's fills, come from the
context's dependence, not from the model. Light on purpose (no torch): the report layer reads it.
"""

from __future__ import annotations

JOINT, COPULA = "joint", "copula"


def paths_of(forecaster) -> str:
    """A forecaster's ``paths`` attribute; one that does not say draws its fields jointly."""
    return getattr(forecaster, "paths", JOINT)


def paths_text(meta: dict) -> str:
    """One sentence for a forecast whose paths come from the copula (its meta's ``path_kind``; the meta's
    ``paths`` is the floor's count of them), else empty: reports of models with joint samples stay as they were."""
    if meta.get("path_kind") != COPULA:
        return ""
    bound = meta.get("range_bound")
    how = "set from the context's excursion beyond the close" if "repaired" in meta else "moved to the close"
    held = f"; high or low {how} in {bound:.1%} of draws" if isinstance(bound, float) else ""
    return (f"Paths: the model's marginal quantiles joined by a Gaussian copula of each context's close/high/low "
            f"(not joint samples of the model{held}).")


def paths_note(rows) -> str:
    """The leaderboard's line: which models' rows give joint samples and which use the copula (rows' ``paths``)."""
    copula = [r["model"] for r in rows if r.get("paths") == COPULA]
    if not copula:
        return ""
    joint = [r["model"] for r in rows if r.get("paths", JOINT) != COPULA]
    rest = f"; joint samples: {', '.join(joint)}" if joint else ""
    return (f"Paths: {', '.join(copula)} predict quantiles, joined into paths by a Gaussian copula of each "
            f"context (their MaxDiff and take-profit fills read that copula){rest}.")
