"""``python -m marketcast.trade ...``: the trade commands alone (the crash test runs this in a subprocess)."""

import sys

import click

from marketcast.console import err_console
from marketcast.errors import MarketcastError
from marketcast.trade.cli import app


def main(argv: list[str] | None = None) -> int:
    try:
        app(args=list(sys.argv[1:] if argv is None else argv), prog_name="marketcast trade", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return 2
    except MarketcastError as exc:
        err_console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
