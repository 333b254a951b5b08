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


def test_evaluate_compares_base_and_tuned_on_the_windows_after_until(tiny_base, data_dir, tmp_path, capsys):
    out = tmp_path / "tuned"
    code = main(["finetune", "--weights", str(tiny_base), "--data-dir", str(data_dir), "--symbols", "SYN",
                 "--until", UNTIL, *TUNE, "--out", str(out), "--evaluate", "--samples", "32"])
    printed = " ".join(capsys.readouterr().out.split())
    assert code == 0
    assert "base vs tuned, out of sample" in printed and "Wilcoxon p =" in printed
    bars = [load_symbol("SYN", data_dir=data_dir)]
    result = evaluate("toto", str(tiny_base), out, bars, date.fromisoformat(UNTIL), context=32, samples=32,
                      device="cpu", dtype="float32", seed=0, data_dir=data_dir)
    (row,) = result["symbols"]
    # bars 301..398 decide after UNTIL (bar 300) and have a next bar: 98 windows, the same for both
    assert row["windows"] == 98 and row["first_decision"].startswith("2021-02-25")
    for k, label in enumerate(("base", "tuned")):  # the paired test's losses are the backtest's own CRPS
        assert result["per_window_crps"][label][0].mean() == pytest.approx(row["crps"][k], rel=1e-9)
    base, tuned = row["crps"]
    assert tuned < 0.8 * base, (tuned, base)  # the planted cycle was learnt
    pooled = result["pooled"]
    assert pooled["mean_diff"] == pytest.approx(base - tuned) and pooled["ci_low"] > 0
    assert pooled["t_p"] < 0.05 and pooled["wilcoxon_p"] < 0.05
    from marketcast.runs.store import RunStore, store_root

    infos = RunStore(store_root()).infos()  # both runs stored, as `marketcast backtest` stores its own
    assert result["base_run"] != result["tuned_run"] and {result["base_run"], result["tuned_run"]} <= set(infos)
    assert "base run backtest-" in printed and "tuned run backtest-" in printed
