"""The options commands share, declared once: the same concept has the same name, short flag, range, check
and help text in every command, and a bad value is refused by click before anything runs, with click's
one message ("Invalid value for '--context' / '-c': 1 is not in the range x>=3.").

Short flags: ``-m`` model, ``-c`` context, ``-s`` samples, ``-n`` windows, ``-H`` horizon.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Callable, Optional, Sequence

import typer

from marketcast.commands.flags import AsJson  # noqa: F401 (declared there: runs list imports no pandas)
from marketcast.backtest.costs import defaults_text
from marketcast.backtest.execution import DEFAULT_EXIT, EXIT_RULES
from marketcast.commands.help import choice_list
from marketcast.data.asset import ASSET_CLASSES
from marketcast.data.load import ON_DUPLICATE
from marketcast.data.read import ON_BAD_LINE
from marketcast.data.validate import MIN_BARS
from marketcast.errors import ConfigError
from marketcast.forecast.registry import MAX_HORIZON, MAX_SAMPLES, MODEL_NAMES
from marketcast.report.paging import MAX_PER_PAGE, MIN_PER_PAGE, TRADES_PER_PAGE

DTYPES = ("float32", "bfloat16")
_DEVICE = re.compile(r"^(cpu|cuda(:\d+)?|mps)$")
MAX_SEED = 2**63 - 1
FEE_RANGE = (0.0, 0.5)  # a fee per side of half the price is a typo (check_costs refuses it too)


def one_of(choices: Sequence[str]) -> Callable[[Optional[str]], Optional[str]]:
    """A typer callback accepting only ``choices`` (None passes: the option was not given)."""
    def check(value: Optional[str]) -> Optional[str]:
        if value is not None and value not in choices:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(map(repr, choices))}.")
        return value

    return check


def check_device(value: str) -> str:
    """``value`` if it names a torch device, else ValueError (the trade settings parse with it too)."""
    if not isinstance(value, str) or not _DEVICE.match(value):
        raise ValueError(f"{value!r} is not a torch device; use cpu, cuda, cuda:N or mps")
    return value


def _device(value: str) -> str:
    try:
        return check_device(value)
    except ValueError as exc:
        raise typer.BadParameter(f"{exc}.") from None


def positive_periods(value: Optional[float]) -> Optional[float]:
    """``--periods-per-year``: None (the calendar's) or a positive, finite number."""
    if value is not None and not (0 < value < float("inf")):
        raise typer.BadParameter(f"{value:g} is not a positive number of periods per year.")
    return value


def open_unit(value: float) -> float:
    """A rate strictly between 0 and 1 (``trade promote --alpha``: 0 would need infinite evidence, 1 none)."""
    if not 0.0 < value < 1.0:  # NaN fails too
        raise typer.BadParameter(f"{value:g} is not strictly between 0 and 1 (e.g. 0.05).")
    return value


def help_of(option) -> str:
    """The help text of an option declared here, for a command that declares the same concept as a layered
    setting (``trade run``: :mod:`marketcast.commands.trade_settings`)."""
    return option.__metadata__[0].help


Model = Annotated[str, typer.Option("--model", "-m", metavar=choice_list(MODEL_NAMES),
                                    help=f"Forecaster: {', '.join(MODEL_NAMES)}.")]
Weights = Annotated[Optional[str], typer.Option(
    "--weights", help="Model weights (every model but the baseline): auto (the public checkpoint; the default), a local "
                      "folder, a Hugging Face repo id, or random (plumbing tests only; toto2 also random:4m). See "
                      "`marketcast models download`.")]
Device = Annotated[str, typer.Option(
    "--device", callback=_device, help="Torch device of the model: cpu, cuda, cuda:N or mps (the baseline "
                                       "always runs on the CPU).")]
Dtype = Annotated[str, typer.Option(
    "--dtype", callback=one_of(DTYPES), metavar=choice_list(DTYPES),
    help=f"Model precision: {' or '.join(DTYPES)} (the baseline computes in float64).")]
Context = Annotated[int, typer.Option(
    "--context", "-c", min=MIN_BARS, help=f"Bars of history per forecast window, at least {MIN_BARS} (fewer "
                                          "available: all of them).")]
Samples = Annotated[int, typer.Option("--samples", "-s", min=1, max=MAX_SAMPLES,
                                      help=f"Forecast sample paths per window, at most {MAX_SAMPLES:,}.")]
MinContext = Annotated[Optional[int], typer.Option(
    "--min-context", metavar="BARS", help="Real bars of history a window must hold to be scored, 3 to --context: "
                                          "windows with fewer are skipped (default: the model's own minimum, the "
                                          "baseline's 3). See docs/backtest.md#context-actually-used.")]
Seed = Annotated[int, typer.Option("--seed", min=0, max=MAX_SEED,
                                   help="Sampling seed: the same seed gives the same sample paths.")]
def windows_callback(value):
    """``--windows``: N >= 1 or ``all`` (marketcast.backtest.period), refused by click in one line."""
    from marketcast.backtest.period import parse_windows  # numpy: only once a command runs

    try:
        return parse_windows(value)
    except ConfigError as exc:
        raise typer.BadParameter(f"{exc}.") from None


def day_callback(value: Optional[str]) -> Optional[str]:
    """``--start`` / ``--end``: an ISO date, refused by click in one line (kept as text: a period reads it)."""
    from marketcast.backtest.period import parse_day

    try:
        parse_day(value, "")
    except ConfigError as exc:
        raise typer.BadParameter(f"{str(exc).strip()}.") from None
    return value


WINDOWS_HELP = "Decision bars per symbol (each settled on the next bar), or all: every window the history allows."
Windows = Annotated[str, typer.Option("--windows", "-n", callback=windows_callback, metavar="INTEGER|all",
                                      show_default="70",  # backtest's; the data decides with --start/--end
                                      help=f"{WINDOWS_HELP} An alternative to --start/--end.")]
Start = Annotated[Optional[str], typer.Option(
    "--start", callback=day_callback, metavar="DATE",
    help="First decision date, YYYY-MM-DD, e.g. 2023-01-02: the windows whose decision bar falls in "
         "--start..--end (inclusive; an alternative to --windows).")]
End = Annotated[Optional[str], typer.Option(
    "--end", callback=day_callback, metavar="DATE",
    help="Last decision date, YYYY-MM-DD, e.g. 2023-12-29 (inclusive; default: the data's last settled bar).")]
Horizon = Annotated[int, typer.Option("--horizon", "-H", min=1, max=MAX_HORIZON,
                                      help=f"Bars ahead to forecast, at most {MAX_HORIZON:,}.")]
DataDir = Annotated[Optional[Path], typer.Option(
    "--data-dir", help="Folder of <SYMBOL>.csv/.parquet bars (default: the embedded SP500 and NASDAQ).")]
AssetClass = Annotated[Optional[list[str]], typer.Option(
    "--asset-class", metavar="CLASS|SYMBOL=CLASS", help=f"Asset class ({', '.join(ASSET_CLASSES)}) for every symbol, or SYMBOL=CLASS for one; "
                          "repeatable (default: from the bar times; the symbol breaks a tie).")]
PeriodsPerYear = Annotated[Optional[float], typer.Option(
    "--periods-per-year", callback=positive_periods,
    help="Periods per year for annualising, a positive number (default: from the bar spacing and the asset "
         "class's calendar, e.g. 252 for NYSE daily bars, 365 for crypto).")]
Plots = Annotated[bool, typer.Option("--plots", help="Also draw each symbol's equity curves as a PNG.")]
OnDuplicate = Annotated[str, typer.Option(
    "--on-duplicate", callback=one_of(ON_DUPLICATE), metavar=choice_list(ON_DUPLICATE),
    help="A timestamp that repeats: error, or keep the first or the last of its bars (with a warning).")]
def _timezone(value: Optional[str]) -> Optional[str]:
    """``--timezone``: refused by every command that takes it, before any work (the embedded data has zones of
    its own and never reached the loaders' check, so ``backtest --timezone Mars/Olympus`` ran)."""
    if value is None:
        return None
    from marketcast.data.zones import check_timezone  # pandas comes with it: only when the option is given

    return check_timezone(value)


Timezone = Annotated[Optional[str], typer.Option(
    "--timezone", callback=_timezone, help="IANA time zone of timestamps written without one, e.g. America/New_York for "
                       "exchange-local bars (default: UTC).")]
OnBadLine = Annotated[str, typer.Option(
    "--on-bad-line", callback=one_of(ON_BAD_LINE), metavar=choice_list(ON_BAD_LINE),
    help="A CSV line with more fields than the header, or a quote it never closes: error (naming the line), or "
         "skip such lines (with one warning counting them).")]
TradesPerPage = Annotated[int, typer.Option(
    "--trades-per-page", min=MIN_PER_PAGE, max=MAX_PER_PAGE,
    help=f"Rows of the HTML tearsheet's trade list shown at a time, {MIN_PER_PAGE} to {MAX_PER_PAGE} (previous/next "
         f"buttons page through the rest; default {TRADES_PER_PAGE}).")]
FanDates = Annotated[Optional[list[str]], typer.Option(
    "--fan-date", metavar="DATE", help="Decision date of a forecast fan in the HTML tearsheet (YYYY-MM-DD); repeatable (default: "
                       "three spread over the run).")]
Fee = Annotated[Optional[float], typer.Option(
    "--fee", min=FEE_RANGE[0], max=FEE_RANGE[1],
    help=f"Fee per side as a fraction; the spread and slippage are charged on top (defaults, {defaults_text()}; "
         "see docs/backtest.md#costs).")]
Hold = Annotated[bool, typer.Option(
    "--hold", help="Score the walk-forward pick held while its decision stays on its side, as `trade replay --hold` "
                   "trades it (docs/backtest.md#holding): bought up beyond a 10% band, costs only when the position "
                   "changes, out under --exit once the decision turns (default: each window's trade on its own).")]
Exit = Annotated[str, typer.Option(
    "--exit", callback=one_of(EXIT_RULES), metavar=choice_list(EXIT_RULES),
    help=f"Where a trade exits (docs/backtest.md#exit-rule; default {DEFAULT_EXIT}): close = a stock at its "
         "session's close (market-on-close), next-open = at the next bar's open, as `trade run` exits, with a "
         "same-side entry against that queued close refused as a wash.")]
