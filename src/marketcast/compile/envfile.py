"""In-place, atomic editing of ``.env.compile``.

The original toggle script rewrote the whole file and dropped unrelated settings (``ADD_LATEST=1``). Here
only the assignment lines of the keys being set change; every other line (other keys, comments, blank lines,
``export`` prefixes, inline comments) is kept byte for byte. Keys not yet present are appended as
``export KEY=VALUE`` so the file stays ``source``-able. The new text is written to a temporary file in the
same folder and renamed over the old one, so a crash never leaves a half-written file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping

from marketcast.errors import ConfigError
from marketcast.fileio import check_writable, write_atomic
from marketcast.settings import read_env_file

_ASSIGN = re.compile(
    r"^(?P<lead>\s*(?:export\s+)?)(?P<key>[A-Za-z_][A-Za-z0-9_]*)(?P<eq>\s*=\s*)(?P<value>.*?)(?P<trail>\s*)$"
)
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.,:/~@+=-]*$")


def _split_inline_comment(value: str) -> tuple[str, str]:
    """(value, ' # comment') for an unquoted value with an inline comment; quoted values keep everything."""
    if value[:1] in ("'", '"'):
        return value, ""
    idx = value.find(" #")
    if idx < 0:
        return value, ""
    return value[:idx].rstrip(), value[len(value[:idx].rstrip()) :]


def _check_value(key: str, value: str) -> None:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        raise ConfigError(f"{key!r} is not a valid environment variable name")
    if not _SAFE_VALUE.match(value):
        raise ConfigError(f"{key}={value!r}: value has characters that would need shell quoting")


def render_updates(text: str, updates: Mapping[str, str]) -> str:
    """``text`` with each key of ``updates`` set (every occurrence rewritten, missing keys appended)."""
    for key, value in updates.items():
        _check_value(key, value)
    seen: set[str] = set()
    lines = text.splitlines(keepends=True)
    out = []
    for line in lines:
        body = line.rstrip("\r\n")
        newline = line[len(body) :]
        m = _ASSIGN.match(body)
        if m and not body.lstrip().startswith("#") and m["key"] in updates:
            _, comment = _split_inline_comment(m["value"])
            body = f"{m['lead']}{m['key']}{m['eq']}{updates[m['key']]}{comment}{m['trail']}"
            seen.add(m["key"])
        out.append(body + newline)
    missing = [k for k in updates if k not in seen]
    if missing:
        if out and not out[-1].endswith(("\n", "\r")):
            out[-1] += "\n"
        out.extend(f"export {k}={updates[k]}\n" for k in missing)
    return "".join(out)


def update_env_file(path: str | Path, updates: Mapping[str, str]) -> str:
    """Set ``updates`` in the env file at ``path`` (created if absent); returns the new text."""
    # a FIFO, a device, a folder, or a path that cannot be written (/proc, a file where a folder should be): exit 3
    # before it is read or replaced, as the README's table says of an output that cannot be written
    target = check_writable(path, "--env-file", folder=False)
    read_env_file(target)  # a CSV given by mistake is refused before it is edited (the one parser's check)
    old = target.read_text() if target.exists() else ""
    new = render_updates(old, updates)
    if new != old or not target.exists():
        write_atomic(target, new, ConfigError)
    return new
