"""A lossless JSON form of a backtest result, so a run's reports can be re-made from the store.

The engine's results are trees of dataclasses, dicts, lists, numpy arrays and pandas timestamps and timedeltas. The codec
walks the tree generically (no field of any result class is named here), so results keep round-tripping
while the engine changes: each dataclass is tagged with its import path and rebuilt field by field, and a
list of dataclasses of one class is stored column-wise (a backtest's decisions and settlements are long
lists of small records). Only classes from the ``marketcast`` package are rebuilt.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib
import json
import math

import numpy as np
import pandas as pd

from marketcast.errors import StateError
from marketcast.runs.predating import PREDATING

_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_PLAIN = {float, int, bool, str, type(None)}
# The one class whose records may predate a setting: a config stored without it reads the value it had then
# (marketcast.runs.predating), not today's default (a missing field would otherwise fall to the class default).
_CONFIG = "marketcast.backtest.config:BacktestConfig"


def _float(x: float):
    return x if math.isfinite(x) else {"$f": "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")}


def _type_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _fields(obj) -> dict:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def _encode(obj):
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)) and not isinstance(obj, np.bool_):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, (float, np.floating)):
        return _float(float(obj))
    if isinstance(obj, pd.DatetimeIndex):
        return {"$dti": _encode(obj.asi8.copy()), "tz": None if obj.tz is None else str(obj.tz), "name": obj.name}
    if isinstance(obj, pd.Timestamp):
        return {"$ts": obj.value, "tz": None if obj.tz is None else str(obj.tz)}
    if isinstance(obj, pd.Timedelta):
        return {"$td": obj.value}
    if isinstance(obj, np.ndarray):
        if obj.dtype == object:
            return {"$obj": [_encode(x) for x in obj.ravel()], "shape": list(obj.shape)}
        data = np.ascontiguousarray(obj)
        return {"$nd": data.dtype.str, "shape": list(data.shape), "b64": base64.b64encode(data.tobytes()).decode()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {"$dc": _type_path(type(obj)), "fields": {k: _encode(v) for k, v in _fields(obj).items()}}
    if isinstance(obj, tuple):
        return {"$tuple": [_encode(x) for x in obj]}
    if isinstance(obj, list):
        kinds = {type(x) for x in obj}
        if len(obj) > 1 and len(kinds) == 1 and dataclasses.is_dataclass(obj[0]):
            names = [f.name for f in dataclasses.fields(obj[0])]
            return {"$dcs": _type_path(type(obj[0])),
                    "columns": {n: _encode([getattr(x, n) for x in obj]) for n in names}}
        if kinds <= _PLAIN:  # the common case, a column of plain values: no per-value dispatch
            return [_float(x) if type(x) is float else x for x in obj]
        return [_encode(x) for x in obj]
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in obj):
            return {k: _encode(v) for k, v in obj.items()}
        return {"$dict": [[_encode(k), _encode(v)] for k, v in obj.items()]}
    raise StateError(f"cannot store a {type(obj).__name__} in the run store; results must be built from "
                     "dataclasses, dicts, lists, numbers, strings, numpy arrays and pandas timestamps/timedeltas")


def _class(path: str) -> type:
    module, _, qualname = path.partition(":")
    if module != "marketcast" and not module.startswith("marketcast."):
        raise StateError(f"run store record names {path!r}; only marketcast classes are rebuilt")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not dataclasses.is_dataclass(obj):
        raise StateError(f"run store record names {path!r}, which is not a dataclass")
    return obj


def _build(cls: type, values: dict):
    """A dataclass instance with exactly these field values (no __init__ / __post_init__: they were valid)."""
    obj = object.__new__(cls)
    for name, value in values.items():
        object.__setattr__(obj, name, value)
    return obj


def _decode(obj):
    if isinstance(obj, list):
        return [_decode(x) for x in obj]
    if not isinstance(obj, dict):
        return obj
    if "$f" in obj:
        return _FLOATS[obj["$f"]]
    if "$ts" in obj:
        return pd.Timestamp(obj["$ts"], tz=obj["tz"])
    if "$td" in obj:
        return pd.Timedelta(obj["$td"])
    if "$dti" in obj:
        index = pd.DatetimeIndex(_decode(obj["$dti"]).view("datetime64[ns]"), name=obj["name"])
        return index if obj["tz"] is None else index.tz_localize("UTC").tz_convert(obj["tz"])
    if "$nd" in obj:
        raw = base64.b64decode(obj["b64"])
        return np.frombuffer(raw, dtype=np.dtype(obj["$nd"])).reshape(obj["shape"]).copy()
    if "$obj" in obj:
        out = np.empty(len(obj["$obj"]), dtype=object)
        for i, x in enumerate(obj["$obj"]):
            out[i] = _decode(x)
        return out.reshape(obj["shape"])
    if "$dc" in obj:
        fields = {k: _decode(v) for k, v in obj["fields"].items()}
        return _build(_class(obj["$dc"]), {**PREDATING, **fields} if obj["$dc"] == _CONFIG else fields)
    if "$dcs" in obj:
        cls = _class(obj["$dcs"])
        columns = {k: _decode(v) for k, v in obj["columns"].items()}
        n = len(next(iter(columns.values()), []))
        return [_build(cls, {k: v[i] for k, v in columns.items()}) for i in range(n)]
    if "$tuple" in obj:
        return tuple(_decode(x) for x in obj["$tuple"])
    if "$dict" in obj:
        return {_decode(k): _decode(v) for k, v in obj["$dict"]}
    return {k: _decode(v) for k, v in obj.items()}


def encode(obj) -> str:
    """JSON text that :func:`decode` turns back into an equal object."""
    return json.dumps(_encode(obj), separators=(",", ":"), allow_nan=False)


def decode(text: str):
    try:
        return _decode(json.loads(text))
    except (ValueError, KeyError, TypeError, AttributeError, ImportError) as exc:
        raise StateError(f"run store record cannot be read back ({type(exc).__name__}: {exc}); it was written "
                         "by an incompatible marketcast version") from None
