"""``marketcast finetune --evaluate``: base and tuned backtested on the same windows after --until, compared with a
paired test on per-window CRPS."""

from __future__ import annotations

from datetime import date

import numpy as np
import pytest

from marketcast.commands import main
from marketcast.data import load_symbol
from marketcast.finetune.evaluate import evaluate, paired_test
from tests.finetune.conftest import TUNE, UNTIL


def test_paired_test_on_a_hand_computed_case():
    # differences 2, 3, 1, 2: mean 2, sd sqrt(2/3), se 0.40825, t = 4.899 on 3 df (t_0.975 = 3.18245)
    out = paired_test(np.array([3.0, 5.0, 4.0, 6.0]), np.array([1.0, 2.0, 3.0, 4.0]))
    assert out["windows"] == 4 and out["mean_diff"] == pytest.approx(2.0)
    assert out["ci_low"] == pytest.approx(2 - 3.18245 * 0.408248, abs=1e-4)
    assert out["ci_high"] == pytest.approx(2 + 3.18245 * 0.408248, abs=1e-4)
    assert out["t_p"] == pytest.approx(0.01628, abs=2e-4)
    assert out["wilcoxon_p"] == pytest.approx(0.125)  # exact: all 4 signs positive, 2 / 2**4
    same = paired_test(np.ones(5), np.ones(5))  # no difference at all: no test, not a crash
    assert same["mean_diff"] == 0.0 and same["t_p"] is None


def baseline_mase(data_dir) -> float:
    """MASE of the next close (Hyndman & Koehler 2006) by hand: the baseline's median close return against the
    actual return, over the mean absolute actual return (the no-change forecast's error), windows after UNTIL."""
    from datetime import timedelta

    from marketcast.backtest.config import BacktestConfig
    from marketcast.backtest.engine import decision_ends, forecast_windows
    from marketcast.backtest.period import Period
    from marketcast.backtest.prepare import prepare
    from marketcast.forecast.registry import load_forecaster

    forecaster = load_forecaster("baseline", seed=0)
    prepared = prepare([load_symbol("SYN", data_dir=data_dir)],
                       Period.of(start=date.fromisoformat(UNTIL) + timedelta(days=1)),
                       BacktestConfig(context=32, num_samples=32, seed=0), min_context=forecaster.min_context)
    (bars,), (config,) = prepared.bars, prepared.configs
    ends = decision_ends(len(bars), config, forecaster.min_context)[:98]
    (fc,) = forecast_windows(forecaster, [(bars, ends)], config)
    close = bars.frame["close"].to_numpy(dtype=np.float64)
    median = np.median(np.asarray(fc.field("close"), dtype=np.float64)[:, :, 0], axis=1) / close[ends] - 1.0
    actual = close[ends + 1] / close[ends] - 1.0
    return float(np.abs(median - actual).mean() / np.abs(actual).mean())


def test_evaluate_compares_base_and_tuned_on_the_windows_after_until(tiny_base, data_dir, tmp_path, capsys):
    out = tmp_path / "tuned"
    code = main(["finetune", "--weights", str(tiny_base), "--data-dir", str(data_dir), "--symbols", "SYN",
                 "--until", UNTIL, *TUNE, "--out", str(out), "--evaluate", "--samples", "32"])
    printed = " ".join(capsys.readouterr().out.split())
    assert code == 0
    assert "base vs tuned vs baseline, out of sample" in printed and "Wilcoxon p =" in printed
    assert "CRPS baseline - tuned per window" in printed and "CRPS baseline - base per window" in printed
    bars = [load_symbol("SYN", data_dir=data_dir)]
    result = evaluate("toto", str(tiny_base), out, bars, date.fromisoformat(UNTIL), context=32, samples=32,
                      device="cpu", dtype="float32", seed=0, data_dir=data_dir)
    (row,) = result["symbols"]
    # bars 301..398 decide after UNTIL (bar 300) and have a next bar: 98 windows, the same for all three
    assert row["windows"] == 98 and row["first_decision"].startswith("2021-02-25")
    for k, label in enumerate(("base", "tuned", "baseline")):  # the paired tests' losses: the backtests' own CRPS
        assert len(result["per_window_crps"][label][0]) == 98  # the same windows for all three
        assert result["per_window_crps"][label][0].mean() == pytest.approx(row["crps"][k], rel=1e-9)
    base, tuned, baseline = row["crps"]
    assert tuned < 0.8 * base, (tuned, base)  # the planted cycle was learnt
    pooled = result["pooled"]
    assert pooled["mean_diff"] == pytest.approx(base - tuned) and pooled["ci_low"] > 0
    assert pooled["t_p"] < 0.05 and pooled["wilcoxon_p"] < 0.05
    for label, loss in (("tuned", tuned), ("base", base)):  # baseline - weights, > 0: the weights beat it
        against = result["pooled_vs_baseline"][label]
        assert against == row["vs_baseline"][label] and against["mean_diff"] == pytest.approx(baseline - loss)
    assert row["mase"][2] == pytest.approx(baseline_mase(data_dir), rel=1e-9)
    from marketcast.runs.store import RunStore, store_root

    infos = RunStore(store_root()).infos()  # all three runs stored, as `marketcast backtest` stores its own
    ids = {result[f"{label}_run"] for label in ("base", "tuned", "baseline")}
    assert len(ids) == 3 and ids <= set(infos)
    assert infos[result["baseline_run"]]["spec"]["model"] == "baseline"
    assert "base run backtest-" in printed and "tuned run backtest-" in printed
