"""Training and validation windows: nothing after --until, validation only on the held-out last 10 %."""

from __future__ import annotations

import re
from datetime import date

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marketcast.data.bars import Bars
from marketcast.errors import ConfigError
from marketcast.finetune.data import make_windows, parse_until
from marketcast.forecast.tuning import fingerprint
from tests.finetune.conftest import planted


def _bars(n=400, seed=0, symbol="SYN"):
    return Bars(symbol, planted(n, seed), "stock", f"{symbol}.csv")


@settings(max_examples=40, deadline=None)
@given(cut=st.integers(150, 390), context=st.integers(3, 40), horizon=st.integers(1, 20))
def test_no_window_touches_a_bar_after_until_and_validation_is_the_held_out_tail(cut, context, horizon):
    bars = _bars()
    until = bars.frame.index[cut].date()
    w = make_windows([bars], until, context, horizon, patch=8)
    n = cut + 1  # bars on or before until
    ctx, ahead = -(-context // 8) * 8, -(-horizon // 8) * 8
    assert w.length == ctx + ahead and w.series[0].shape == (3, n)
    held = max(int(np.ceil(0.1 * n)), ahead)
    ends_train, ends_val = w.train[:, 1], w.validation[:, 1]
    assert ends_train.max() == n - held and ends_train.min() == w.length  # every window inside, none after
    assert ends_val.max() <= n and (ends_val - ahead >= n - held).all()  # scored steps start in the tail
    np.testing.assert_array_equal(w.series[0][0], bars.frame["close"].to_numpy(np.float32)[:n])
    assert w.symbols["SYN"]["fingerprint"] == fingerprint(bars.frame, until)
    assert w.symbols["SYN"]["last"].startswith(str(until))


def test_validation_windows_are_capped_and_spread_evenly():
    bars = _bars(5000)
    w = make_windows([bars], bars.frame.index[4000].date(), 16, 1, patch=8)
    assert len(w.validation) == 256 and w.validation[0, 1] < w.validation[-1, 1] == 4001


def test_windows_of_several_symbols_index_their_own_series():
    a, b = _bars(300, 0, "AAA"), _bars(400, 1, "BBB")
    w = make_windows([a, b], a.frame.index[250].date(), 16, 2, patch=8)
    assert set(w.train[:, 0]) == {0, 1} and w.batch(w.train[:5]).shape == (5, 3, 24)
    k, e = w.train[-1]
    np.testing.assert_array_equal(w.batch(w.train[-1:])[0].numpy(), w.series[k][:, e - 24:e])


@pytest.mark.parametrize("cut,context,message", [
    (399, 16, "--until 2021-07-13 is on or after the last bar of SYN (SYN.csv) (2021-07-13); tune on an "
              "earlier cutoff"),
    (40, 64, "--until 2020-02-26 leaves 41 bars of SYN (SYN.csv) (from 2020-01-01); a --context of 64 (rounded up "
             "to 64, patches of 8) and --horizon 1 need at least 80"),
])
def test_a_cutoff_that_leaves_no_window_is_one_clear_line(cut, context, message):
    bars = _bars()
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        make_windows([bars], bars.frame.index[cut].date(), context, 1, patch=8)


def test_until_must_be_a_date():
    assert parse_until("2020-10-27") == date(2020, 10, 27)
    with pytest.raises(ConfigError, match="--until '27/10/2020' is not a date; use YYYY-MM-DD"):
        parse_until("27/10/2020")
