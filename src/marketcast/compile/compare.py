"""Compare two backtest JSONs (e.g. eager vs compiled) per symbol and strategy.

A file holds one backtest object ``{symbol, strategies: {name: {return, sharpe, ...}}, metrics: {...}}``, a
list of them, or ``{"symbols": [...]}``; objects are matched by ``symbol``. Per strategy the return delta
(B - A) decides: ``|delta| > 0.05`` FAIL, ``> 0.01`` WARN, else PASS. Sharpe and metric (val-loss) deltas are
shown, not judged. A strategy present in only one file is a WARN with a note.

A file that cannot be a backtest is one line (exit 2): a symbolic link that points at itself (or around a
loop), and JSON nested deeper than Python's parser can follow (``[[[[...`` a file that quotes itself, say),
which would otherwise end in a RecursionError traceback.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from marketcast.errors import ConfigError, first_line

FAIL_ABOVE = 0.05
WARN_ABOVE = 0.01
ORDER = {"PASS": 0, "WARN": 1, "FAIL": 2}


def status_for(delta: float | None) -> str:
    if delta is None:
        return "WARN"
    if abs(delta) > FAIL_ABOVE:
        return "FAIL"
    if abs(delta) > WARN_ABOVE:
        return "WARN"
    return "PASS"


def _number(value, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: {value!r} is not a number")
    return float(value) if math.isfinite(value) else None


def load_backtests(path: str | Path) -> dict[str, dict]:
    """symbol -> backtest object; malformed input is a ConfigError naming the file and the problem."""
    p = Path(path)
    if p.is_symlink():
        try:
            p.resolve(strict=True)
        except RuntimeError:  # Python 3.11's resolve() on a symlink loop (3.13 raises OSError ELOOP)
            raise ConfigError(f"{p}: a symbolic link that points back at itself (a loop); pass the backtest JSON "
                              f"file itself") from None
        except OSError as exc:
            raise ConfigError(f"{p}: {exc.strerror or first_line(exc)}; pass the backtest JSON file itself") from None
    if not p.is_file():
        raise ConfigError(f"{p}: no such backtest JSON file")
    try:
        data = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: not valid JSON ({exc})") from None
    except RecursionError:
        raise ConfigError(f"{p}: JSON nested deeper than can be read (a file that embeds itself?); a backtest "
                          f"JSON is a few levels deep: pass the one `marketcast backtest --json` wrote") from None
    if isinstance(data, dict) and "symbols" in data and "strategies" not in data:
        data = data["symbols"]
    items = data if isinstance(data, list) else [data]
    out: dict[str, dict] = {}
    for i, item in enumerate(items):
        where = f"{p}[{i}]" if isinstance(data, list) else str(p)
        if not isinstance(item, dict) or not isinstance(item.get("strategies"), dict):
            raise ConfigError(f"{where}: expected a backtest object with a 'strategies' mapping")
        symbol = str(item.get("symbol") or f"#{i}")
        if symbol in out:
            raise ConfigError(f"{where}: symbol {symbol!r} appears twice")
        for name, s in item["strategies"].items():
            if not isinstance(s, dict) or "return" not in s:
                raise ConfigError(f"{where}: strategy {name!r} has no 'return'")
            _number(s["return"], f"{where}: strategies.{name}.return")
        out[symbol] = item
    if not out:
        raise ConfigError(f"{p}: holds no backtest objects")
    return out


def compare_backtests(a: dict[str, dict], b: dict[str, dict]) -> dict:
    """Rows per (symbol, strategy), metric deltas per symbol, overall status (worst row)."""
    notes = []
    if list(a) == ["#0"] and list(b) == ["#0"]:
        common = ["#0"]
    else:
        common = [s for s in a if s in b]
        for s in a:
            if s not in b:
                notes.append(f"{s}: only in A")
        for s in b:
            if s not in a:
                notes.append(f"{s}: only in B")
    if not common:
        raise ConfigError("the two files have no symbol in common; nothing to compare")
    rows = []
    metric_deltas: dict[str, dict] = {}
    for sym in common:
        sa, sb = a[sym]["strategies"], b[sym]["strategies"]
        for name in list(dict.fromkeys([*sa, *sb])):
            ra = _number(sa[name]["return"], name) if name in sa else None
            rb = _number(sb[name]["return"], name) if name in sb else None
            sha = _number(sa.get(name, {}).get("sharpe"), name) if name in sa else None
            shb = _number(sb.get(name, {}).get("sharpe"), name) if name in sb else None
            delta = rb - ra if ra is not None and rb is not None else None
            if name not in sa or name not in sb:
                notes.append(f"{sym}: strategy {name!r} only in {'B' if name not in sa else 'A'}")
            rows.append({
                "symbol": sym, "strategy": name, "return_a": ra, "return_b": rb, "return_delta": delta,
                "sharpe_a": sha, "sharpe_b": shb,
                "sharpe_delta": shb - sha if sha is not None and shb is not None else None,
                "status": status_for(delta),
            })
        ma, mb = a[sym].get("metrics") or {}, b[sym].get("metrics") or {}
        deltas = {}
        for key in ma:
            va, vb = ma.get(key), mb.get(key)
            if isinstance(va, (int, float)) and isinstance(vb, (int, float)) and not isinstance(va, bool):
                deltas[key] = float(vb) - float(va)
        metric_deltas[sym] = deltas
    status = max((r["status"] for r in rows), key=ORDER.__getitem__, default="PASS")
    return {"status": status, "thresholds": {"fail_above": FAIL_ABOVE, "warn_above": WARN_ABOVE},
            "rows": rows, "metric_deltas": metric_deltas, "notes": notes}


def compare_files(a: str | Path, b: str | Path) -> dict:
    return compare_backtests(load_backtests(a), load_backtests(b))
