"""User-facing errors and the exit codes the CLI ends with: one line on stderr, never a traceback
(``--debug`` shows it).

A supervisor (systemd, a shell loop, cron) reads the code to decide what to do next:

====  ==============  =============================================================================
code  name            meaning
====  ==============  =============================================================================
0     OK              done
1     CHECK_FAILED    a check ran and its verdict is FAIL (``compile check --mode production-check``,
                      ``compile compare``, ``runs compare``), or a ``sweep`` ran with failed cells
2     USAGE           bad input: an option (one past its upper limit too), a config value, a data
                      file, a settings file that is a FIFO, a device or not KEY=VALUE lines, a
                      ``runs query`` stopped at its ``--timeout``; fix it and run again
3     STATE           a file or folder cannot be used: a corrupt or foreign state database (a
                      ``journal.db`` that is a folder, or a link to a FIFO or a device), a run
                      store that is a file or holds a damaged part, an output folder or plot path that
                      cannot be created or written, an output or state path that is a FIFO, a device
                      or a socket (both checked before any work), a full disk (no run recorded, no
                      lock and no new state folder left), an output folder another marketcast
                      process is writing; nothing was half-written
4     AUTH            the broker refused the credentials
5     HALTED          trading is halted (a risk limit tripped, or the journal and the broker disagree);
                      see ``trade status``, then ``trade resume`` / ``trade reconcile``
6     UNAVAILABLE     the broker or the network stayed unavailable after retries, or a Ray cluster
                      did not answer within its deadline; try again later
130   INTERRUPTED     stopped by Ctrl-C (SIGINT); temporary files removed; a sweep's run marked
                      interrupted; a backtest stopped before its commit records nothing, one stopped
                      during or after it finishes the record first and says so
143   TERMINATED      stopped by SIGTERM; as 130
====  ==============  =============================================================================
"""

from enum import IntEnum


def first_line(exc: BaseException, limit: int = 200) -> str:
    """The first line of a library's exception message (its type name when it has none), for one-line errors;
    one longer than ``limit`` is cut at a word's end and marked ``...`` (never mid-word)."""
    line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if len(line) <= limit:
        return line
    head = line[:limit - 3]
    if " " in head and not line[limit - 3].isspace():
        head = head.rsplit(" ", 1)[0]
    return head.rstrip(" ,;:") + "..."


class ExitCode(IntEnum):
    OK = 0
    CHECK_FAILED = 1
    USAGE = 2
    STATE = 3
    AUTH = 4
    HALTED = 5
    UNAVAILABLE = 6
    INTERRUPTED = 130
    TERMINATED = 143


class MarketcastError(Exception):
    """Bad input or configuration the user can fix; the message says what, where and how."""

    exit_code: int = ExitCode.USAGE


class DataError(MarketcastError):
    """A bars file or dataset that cannot be used as given."""


class ConfigError(MarketcastError):
    """A setting, flag or environment variable with a value we cannot accept."""


class ModelLoadError(MarketcastError):
    """Weights or a config that cannot be found or do not fit the model."""


class ForecastError(MarketcastError):
    """A model's output that cannot be used (non-finite sample paths); the message names symbol and window."""


class StateError(MarketcastError):
    """A state file (journal, broker database, run store) that is corrupt, missing or cannot be written."""

    exit_code = ExitCode.STATE


class AuthError(MarketcastError):
    """The broker refused the credentials (401/403 on the account)."""

    exit_code = ExitCode.AUTH


class HaltedError(MarketcastError):
    """Trading is halted; the message says why and the command that lifts it."""

    exit_code = ExitCode.HALTED


class UnavailableError(MarketcastError):
    """A service stayed unavailable after every retry (rate limits, 5xx, timeouts)."""

    exit_code = ExitCode.UNAVAILABLE


class DataWarning(UserWarning):
    """Bars that load but look wrong (a price jump beyond the plausible, dropped duplicate bars)."""


class ForecastWarning(UserWarning):
    """A forecast that needed a documented repair (sample paths floored above zero)."""


class StoreWarning(UserWarning):
    """A damaged file of the run store (a cut-short part, a run.json that is not a run's) skipped while reading."""
