"""The store's lossless record: a real result comes back equal, and so do the reports rendered from it."""

import math

import numpy as np
import pandas as pd
import pytest

from marketcast.backtest.orders import Decision
from marketcast.backtest.report import render_outputs
from marketcast.errors import StateError
from marketcast.runs.codec import decode, encode


def test_a_backtest_result_round_trips_and_renders_the_same_reports(results):
    back = [decode(encode(r)) for r in results]
    assert render_outputs(back) == render_outputs(results)  # JSON, Markdown, trades.csv and PNG bytes
    for a, b in zip(results, back):
        assert a.decision_times.equals(b.decision_times) and str(b.decision_times.tz) == "UTC"
        assert a.views == b.views and a.latest_view == b.latest_view
        for name, run in a.strategies.items():
            other = b.strategies[name]
            assert list(other.decisions) == list(run.decisions)  # columnar (Orders/Fills): compare per window
            assert list(other.settlements) == list(run.settlements)
            np.testing.assert_array_equal(other.returns, run.returns)
            assert other.returns.dtype == run.returns.dtype
        scores = a.strategies["maxdiff"].final_state.scores
        np.testing.assert_array_equal(b.strategies["maxdiff"].final_state.scores, scores)


def test_special_values_keep_their_type_and_value():
    stamp = pd.Timestamp("2024-03-01 14:30", tz="America/New_York")
    obj = {
        "nan": math.nan, "inf": -math.inf, "tuple": (1, 2.5, None), "stamp": stamp, "naive": pd.Timestamp("2020-01-02"),
        "ints": np.arange(6, dtype=np.int32).reshape(2, 3), "bools": np.array([True, False]),
        "objects": np.array(["a", None], dtype=object), 3: "int key", "$odd": "dollar key",
        "decisions": [Decision(1, 10.5, None), Decision(-1, None, 9.0)], "one": [Decision()],
        "np_scalars": [np.float32(1.5), np.int64(7), np.bool_(True)], "spacing": pd.Timedelta(hours=1),
    }
    back = decode(encode(obj))
    assert math.isnan(back["nan"]) and back["inf"] == -math.inf and back["tuple"] == (1, 2.5, None)
    assert back["stamp"] == stamp and str(back["stamp"].tz) == "America/New_York" and back["naive"].tz is None
    assert back["ints"].dtype == np.int32 and back["ints"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert back["bools"].tolist() == [True, False] and back["objects"].tolist() == ["a", None]
    assert back[3] == "int key" and back["$odd"] == "dollar key"
    assert back["decisions"] == obj["decisions"] and back["one"] == [Decision()]
    assert back["np_scalars"] == [1.5, 7, True]
    assert back["spacing"] == pd.Timedelta(hours=1) and isinstance(back["spacing"], pd.Timedelta)


def test_only_marketcast_dataclasses_are_rebuilt():
    text = encode(Decision(1)).replace("marketcast.backtest.orders", "collections")
    with pytest.raises(StateError, match="only marketcast classes"):
        decode(text)
    with pytest.raises(StateError, match="cannot store a set"):
        encode({"s": {1, 2}})
    with pytest.raises(StateError, match="incompatible marketcast version"):
        decode('{"$dc": "marketcast.backtest.orders:NoSuchClass", "fields": {}}')
