"""The whole commands hit the compile cache an earlier process wrote, and say so: `marketcast forecast` (its
--json ``compile`` object and one stderr line) and `marketcast trade run --once` (the warm-up record).

A tiny Toto checkpoint (the real architecture, a small config) keeps compiling short on the CPU. Proved with
inductor's FX-graph cache counters counted around the first forecast, not with timings (the speed-up is
``benchmarks/process_start_bench.py``'s row).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from marketcast.data import load_symbol
from marketcast.forecast.toto.config import TotoConfig
from marketcast.forecast.toto.loading import save_checkpoint
from marketcast.forecast.toto.model import TotoModel
from marketcast.trade.ops.monitor import read_records

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    from marketcast.forecast.toto.model import init_weights

    config = TotoConfig.tiny()
    return save_checkpoint(init_weights(TotoModel(config), seed=3).eval(), config,
                           tmp_path_factory.mktemp("tiny") / "ckpt")


def _cli(args: list[str], cache: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}  # conftest's temp folder
    env.update(TOTO_COMPILE="1", MARKETCAST_COMPILE_CACHE_DIR=str(cache), TORCHINDUCTOR_COMPILE_THREADS="1",
               PYTHONPATH=str(ROOT / "src"), COLUMNS="200")
    done = subprocess.run([sys.executable, "-m", "marketcast.commands", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_a_second_forecast_process_loads_every_graph_the_first_compiled(tmp_path, checkpoint):
    args = ["forecast", "SP500", "--model", "toto", "--weights", str(checkpoint), "--samples", "8", "--horizon",
            "2", "--context", "64", "--json"]
    runs = [_cli(args, tmp_path / "cache", tmp_path) for _ in range(2)]
    cold, warm = (json.loads(r.stdout)["compile"] for r in runs)
    assert cold["graphs_compiled"] >= 1 and cold["graphs_from_cache"] == 0  # an empty folder: all compiled
    assert warm["graphs_from_cache"] == cold["graphs_compiled"] and warm["graphs_compiled"] == 0
    assert cold["cache_dir"] == warm["cache_dir"] == str((tmp_path / "cache" / "inductor").resolve())
    said = [line for line in runs[1].stderr.splitlines() if line.startswith("compile ")]
    assert said == [f"compile {warm['mode']}: {warm['graphs_from_cache']} graph(s) loaded from the cache "
                    f"({warm['cache_dir']}), 0 compiled now; first forecast {warm['first_forecast_s']:.2f} s"]


def test_a_trade_run_once_warms_up_from_the_cache_a_forecast_wrote(tmp_path, checkpoint):
    """The loop's warm-up shape (one window, horizon 1) differs from the fan's, so the first `trade run` compiles
    it and the second finds it; both record what their warm-up took. Three bars: the model warms up on them, and
    the planner, which needs four, waits for more history and forecasts nothing, so each process compiles (or
    loads) the warm-up's graph alone, the one counted here (the cycle's own shapes cost minutes more to compile)."""
    data = tmp_path / "data"
    data.mkdir()
    load_symbol("SP500").frame.loc[:"2018-07-20"].iloc[-3:].to_csv(data / "SP500.csv")
    (tmp_path / "clock").write_text("2018-07-20T21:30:00Z")
    warmups = []
    for k in range(2):
        state = tmp_path / f"state{k}"
        _cli(["trade", "run", "--symbols", "SP500", "--model", "toto", "--weights", str(checkpoint), "--data-dir",
              str(data), "--state-dir", str(state), "--clock-file", str(tmp_path / "clock"), "--once"],
             tmp_path / "cache", tmp_path)
        records = read_records(state)
        assert records[-1]["strategies"] == {"SP500": "none"} and records[-1]["recompiles_since_start"] == 0
        warmups.append(next(r["warmup"] for r in records if "warmup" in r))
    cold, warm = (w["compile"] for w in warmups)
    assert cold["graphs_compiled"] >= 1 and cold["graphs_from_cache"] == 0
    assert warm["graphs_from_cache"] == cold["graphs_compiled"] and warm["graphs_compiled"] == 0
