"""Shared rich consoles: tables and progress on stdout, errors and warnings on stderr.

Piped output (CI logs, ``| tee``) gets a wide fixed width instead of rich's 80-column default, so summary
tables are not folded into unreadable cells.
"""

import os
import sys

from rich.console import Console


def _width(stream) -> int | None:
    if "COLUMNS" in os.environ or stream.isatty():
        return None
    return 160


console = Console(width=_width(sys.stdout))
err_console = Console(stderr=True, width=_width(sys.stderr))
