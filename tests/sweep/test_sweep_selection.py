"""A real sweep of 100 cells: every cell is a trial; its closing output and ``runs show`` deflate the best."""

from __future__ import annotations

import math
from statistics import NormalDist, variance

import numpy as np
import pytest

from marketcast.backtest import overfit
from marketcast.commands import main
from marketcast.runs.store import RunStore

from .helpers import write_bars

pytestmark = pytest.mark.usefixtures("ray_address")


def test_a_sweep_of_100_cells_prints_the_run_level_dsr_with_100_trials(tmp_path, capsys):
    write_bars(tmp_path / "bars", ["AAA"], n=90)  # one symbol: a forecast call of one symbol (its result, not a list)
    multipliers = ", ".join(f"{0.5 + 0.25 * k:g}" for k in range(10))
    (tmp_path / "grid.toml").write_text(
        '[data]\ndir = "bars"\n\n[options]\nwindows = 24\ncontext = 48\nnum_samples = 16\n\n[grid]\n'
        f'fill_mode = ["touch", "penetrate"]\nci_multiplier = [{multipliers}]\n'
        'spread = [0.0, 0.0005, 0.001, 0.002, 0.004]\n')
    store = RunStore(tmp_path / "store")
    assert main(["sweep", str(tmp_path / "grid.toml"), "--store", str(store.root)]) == 0
    swept = capsys.readouterr().out
    assert "100 cells, 100 ok, 0 failed" in swept and "run: 100 trials (cells); best cell AAA " in swept

    # by hand, from the Sharpe ratios the store holds: the paper's formula and overfit.py's functions
    cells = store.query('SELECT "walk_forward.sharpe_per_period" AS sr, "walk_forward.observations" AS t, '
                        '"walk_forward.skew" AS g3, "walk_forward.kurtosis" AS g4 FROM cells '
                        'ORDER BY sr DESC NULLS LAST, cell_index')
    sharpes = cells["sr"].dropna().tolist()
    v, best = variance(sharpes), cells.iloc[0]
    gamma, z = 0.5772156649015329, NormalDist()
    sr0 = math.sqrt(v) * ((1 - gamma) * z.inv_cdf(1 - 1 / 100) + gamma * z.inv_cdf(1 - 1 / (100 * math.e)))
    dsr = z.cdf((best.sr - sr0) * math.sqrt(best.t - 1)
                / math.sqrt(1 - best.g3 * best.sr + (best.g4 - 1) / 4 * best.sr**2))
    sr0_overfit = overfit.expected_max_sharpe(100, float(np.var(sharpes, ddof=1)))
    assert dsr == pytest.approx(overfit.deflated_sharpe(best.sr, int(best.t), best.g3, best.g4, sr0_overfit))
    assert f"DSR {dsr:.2f}" in swept

    assert main(["runs", "show", "latest", "--store", str(store.root)]) == 0
    shown = capsys.readouterr().out
    assert "run: 100 trials (cells); best cell AAA " in shown and f"DSR {dsr:.2f}" in shown
    lucky = f"the best of 100 cells is not distinguishable from luck (DSR {dsr:.2f}"
    assert (lucky in shown) == (lucky in swept)
    assert (lucky in shown) or dsr >= 0.95
