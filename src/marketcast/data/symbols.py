"""What a symbol may be: the one check every command that turns a symbol into a file name applies.

A symbol names a file (``DIR/<SYMBOL>.csv``), a journal row and a run-store partition, so it may hold only
letters, digits and ``. _ ^ = -`` (``BRK.B``, ``^GSPC``, ``EURUSD=X``, ``BTC-USD``): no path separator, no
``..``, nothing a shell or a file system reads specially.
"""

from __future__ import annotations

import re

from marketcast.errors import ConfigError

_ALLOWED = re.compile(r"[A-Za-z0-9._^=-]{1,64}")


def check_symbol(symbol: str, where: str = "symbol") -> str:
    """``symbol`` unchanged when it is a safe name; else one ConfigError line naming ``where`` it came from."""
    text = str(symbol)
    if not _ALLOWED.fullmatch(text) or ".." in text or text.startswith("."):
        shown = text if len(text) <= 40 else text[:37] + "..."
        odd = next((c for c in text if not _ALLOWED.fullmatch(c)), None)
        why = ("it is empty" if not text else "longer than 64 characters" if len(text) > 64 else
               f"{odd!r} is not an ASCII letter, digit or one of '. _ ^ = -'" if odd is not None else
               "'..' or a leading '.' would leave the folder")
        raise ConfigError(f"{where} {shown!r} is not a symbol: {why}; name the file and the symbol with ASCII "
                          "letters, digits and '. _ ^ = -' (such as BRK.B, ^GSPC, EURUSD=X)")
    return text
