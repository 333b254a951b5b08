"""``python -m marketcast.trade ...``: the trade commands alone (the crash test runs this in a subprocess),
ending through the CLI's one error path."""

import sys

from marketcast import failures
from marketcast.help import adopt
from marketcast.trade.cli import app


def main(argv: list[str] | None = None) -> int:
    return failures.main(adopt(app), argv, prog_name="marketcast trade")


if __name__ == "__main__":
    sys.exit(main())
