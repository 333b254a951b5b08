"""Every caller of the backtest engine prepares its windows one way (marketcast.backtest.prepare): the tuned-weights
guard sees the same decision bars from backtest, forecast --calibration, sweep, models compare and finetune
--evaluate, and they are the scored windows the engine then runs."""

from __future__ import annotations

from datetime import date

import pandas as pd
import pytest

import marketcast.forecast.tuning as tuning_module
from marketcast.backtest.config import BacktestConfig
from marketcast.backtest.period import Period, windows_of
from marketcast.backtest.prepare import prepare, scored_decisions
from marketcast.commands import main
from marketcast.data import load_symbol
from marketcast.errors import ConfigError
from tests.finetune.conftest import BARS, UNTIL

WINDOWS = BARS - 2 - 300  # the decision bars 301..398 after UNTIL (bar 300), each with its bar t+1
FAST = ["--samples", "8", "--context", "32"]


@pytest.fixture
def seen(monkeypatch):
    """The (symbol, decision bars) each guard call of the preparation path sees; the real guard still runs."""
    calls: list[tuple[str, pd.DatetimeIndex]] = []
    real = tuning_module.guard_windows

    def spy(tuning, runs, *args, **kwargs):
        runs = list(runs)
        calls.extend((symbol, pd.DatetimeIndex(decisions)) for symbol, _, decisions in runs)
        return real(tuning, runs, *args, **kwargs)

    monkeypatch.setattr(tuning_module, "guard_windows", spy)
    return calls


def test_scored_decisions_are_the_last_windows_with_a_bar_after_them(data_dir):
    bars = load_symbol("SYN", data_dir=data_dir)
    index = bars.frame.index
    got = scored_decisions(bars, BacktestConfig(windows=5))  # include_latest: its bar has no t+1, so not scored
    assert list(got) == list(index[BARS - 6:BARS - 1])
    assert got[-1] == index[-2] and len(got) == 5


def test_a_fixed_count_with_an_end_is_the_last_windows_of_the_bars_through_that_end(data_dir):
    bars = load_symbol("SYN", data_dir=data_dir)
    end = bars.frame.index[349].date()
    cut, n = windows_of(bars, Period(10, None, end))
    assert n == 10 and len(cut) == 351  # through the settlement bar of the window decided on bar 349
    assert list(scored_decisions(cut, BacktestConfig(windows=n))) == list(bars.frame.index[340:350])


def test_the_guard_refuses_the_first_scored_window_in_sample(tuned, data_dir):
    whole = [load_symbol("SYN", data_dir=data_dir)]
    with pytest.raises(ConfigError, match=r"SYN: window 1 \(decision bar 2021-02-24\) is on or before 2021-02-24"):
        prepare(whole, Period(WINDOWS + 1), BacktestConfig(windows=WINDOWS + 1), weights=str(tuned))
    out = prepare(whole, Period(WINDOWS), BacktestConfig(windows=WINDOWS), weights=str(tuned))
    assert out.decisions()[0][0].date() > date.fromisoformat(UNTIL)


def test_the_five_callers_guard_the_same_windows(tuned, tiny_base, data_dir, tmp_path, seen, monkeypatch):
    from marketcast.finetune.evaluate import evaluate
    from marketcast.sweep.spec import load_spec

    monkeypatch.setenv("MARKETCAST_RUN_STORE", "off")
    dd, calls = str(data_dir), []

    def guarded(done) -> None:  # the caller went through the preparation path: its guard saw windows
        calls.append(len(seen))
        assert done in (0, None) and calls[-1] > (calls[-2] if len(calls) > 1 else 0)

    guarded(main(["backtest", "SYN", "--data-dir", dd, "--model", "toto", "--weights", str(tuned), *FAST,
                  "--windows", str(WINDOWS), "--no-spa", "--output-dir", str(tmp_path / "bt")]))
    guarded(main(["forecast", "SYN", "--data-dir", dd, "--model", "toto", "--weights", str(tuned), *FAST,
                  "--calibration", "--windows", str(WINDOWS)]))
    guarded(main(["models", "compare", "--symbols", "SYN", "--models", "toto", "--weights", f"toto={tuned}",
                  "--data-dir", dd, "--windows", str(WINDOWS), *FAST, "--store", "off"]))
    spec = tmp_path / "spec.toml"
    spec.write_text(f'name = "one"\n[data]\nsymbols = ["SYN"]\ndir = "{dd}"\n[options]\nwindows = {WINDOWS}\n'
                    f'num_samples = 8\ncontext = 32\n[grid]\nmodel = ["toto"]\n[models.toto]\nweights = "{tuned}"\n')
    cells = load_spec(spec).cells()
    guarded(None)
    assert [c.config.windows for c in cells] == [WINDOWS]
    whole = [load_symbol("SYN", data_dir=data_dir)]
    guarded(evaluate("toto", str(tiny_base), tuned, whole, date.fromisoformat(UNTIL), context=32, samples=8,
                     device="cpu", dtype="float32", seed=0, data_dir=data_dir) and None)
    expected = list(whole[0].frame.index[301:BARS - 1])
    assert len(expected) == WINDOWS and {symbol for symbol, _ in seen} == {"SYN"}
    assert all(list(decisions) == expected for _, decisions in seen), [(len(d), d[0], d[-1]) for _, d in seen]
