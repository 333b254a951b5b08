"""Read a page back the way the browser does: each chart's figure JSON, typed arrays decoded."""

from __future__ import annotations

import base64
import json
import re

import numpy as np

BLOCK = re.compile(r'<script type="application/json" data-chart="([^"]+)">(.*?)</script>', re.S)


def _decode(value):
    if isinstance(value, dict):
        if set(value) >= {"dtype", "bdata"}:
            arr = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
            shape = value.get("shape")
            return arr.reshape([int(n) for n in str(shape).split(",")]) if shape else arr
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def figures(page: str) -> dict[str, dict]:
    """Chart id -> figure (``data`` and ``layout``) of every chart on the page, in page order."""
    return {chart_id: _decode(json.loads(text)) for chart_id, text in BLOCK.findall(page)}


def trace(fig: dict, name: str) -> dict:
    found = [t for t in fig["data"] if t.get("name") == name]
    assert len(found) == 1, f"{name!r} in {[t.get('name') for t in fig['data']]}"
    return found[0]
