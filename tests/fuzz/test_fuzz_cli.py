"""Property-based fuzzing of the CLI's options: any value of any option ends in exit 0, or in exit 2 with one
line naming the option and nothing written. Bounded, derandomized examples on the embedded data."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.fuzz.harness import PROFILE
from tests.fuzz.test_fuzz_loaders import run_cli

CLI = settings(derandomize=True, database=None, deadline=None, max_examples=40 if PROFILE == "ci" else 120,
               suppress_health_check=[HealthCheck.too_slow])
TEXT = st.sampled_from(["", "abc", "1e3", "-0", "\uff11", "nan", "inf", "1.5", "--", "0x10"])
DEVICE_OK = re.compile(r"^(cpu|cuda(:\d+)?)$")


def mostly(valid: st.SearchStrategy, invalid: st.SearchStrategy) -> st.SearchStrategy:
    """Valid four times in five, so that most runs get past the parser and exercise the command."""
    return st.integers(0, 4).flatmap(lambda k: invalid if k == 4 else valid)


def ints(lo: int, hi: int) -> st.SearchStrategy:
    return mostly(st.integers(lo, hi).map(str), st.integers(-3, lo - 1).map(str) | TEXT if lo > -3 else TEXT)


def floats(lo: float, hi: float) -> st.SearchStrategy:
    wild = st.floats(-2, 2).map(repr) | st.sampled_from(["nan", "inf", "-inf", "1e300"]) | TEXT
    return mostly(st.floats(lo, hi).map(repr), wild)


def choice(valid: tuple[str, ...], invalid: tuple[str, ...] = ("bogus",)) -> st.SearchStrategy:
    return mostly(st.sampled_from(valid), st.sampled_from(invalid) | TEXT | st.text(max_size=8))


def _options(draw, spec: dict) -> list[str]:
    """Each option given one time in three, as ``--name=value`` ('=' keeps a value like '--' a value)."""
    return [f"{name}={draw(values)}" for name, values in spec.items() if draw(st.integers(0, 2)) == 2]


FORECAST = {
    "--horizon": ints(1, 40), "--samples": ints(1, 600), "--context": ints(3, 6000), "--seed": ints(0, 10**9),
    "--model": choice(("baseline",), ("prophet", "Baseline")), "--device": choice(("cpu",), ("cuda:x", "bogus")),
    "--dtype": choice(("float32", "bfloat16"), ("bogus", "float16")), "--weights": choice(("auto",), ("x/y",)),
    "--on-duplicate": choice(("first", "last", "error")),
}
BACKTEST = {
    "--windows": ints(1, 12) | st.just("99999"), "--samples": ints(1, 64), "--context": ints(3, 300),
    "--seed": ints(0, 99), "--point": choice(("median", "mean", "p90", "trimmed_mean_10"), ("quantile_2", "p")),
    "--fill-mode": choice(("touch", "penetrate")), "--same-bar": choice(("pessimistic", "nearest")),
    "--fee": floats(0, 0.01), "--spread": floats(0, 0.01), "--ci-low": floats(0, 0.45),
    "--ci-high": floats(0.55, 1), "--ci-multiplier": floats(0, 3),
    "--strategies": choice(("simple", "simple,maxdiff", "ci_guard,buy_hold"), ("moon", ",")),
    "--asset-class": choice(("stock", "crypto"), ("bond",)), "--device": choice(("cpu",), ("bogus",)),
    "--dtype": choice(("float32",), ("bogus",)), "--on-duplicate": choice(("error", "last")),
}


def _check(code: int, out: str, err: str, args: list[str], folder: Path) -> None:
    event(f"exit {code}")
    assert code in (0, 2), (code, args, err)
    if code == 2:
        assert err.startswith("error:") and len(err.strip().splitlines()) == 1, (args, err)
        assert not [p for p in folder.rglob("*") if p.is_file()], (args, list(folder.rglob("*")))
    for arg in args:  # a device or dtype no model accepts is refused, whatever the model
        name, _, value = arg.partition("=")
        if (name == "--device" and not DEVICE_OK.match(value)) or (name == "--dtype" and value not in (
                "float32", "bfloat16")):
            assert code == 2, (args, err)


@CLI
@given(st.data())
def test_forecast_options(data):
    args = _options(data.draw, FORECAST)
    with tempfile.TemporaryDirectory() as folder:
        plot = data.draw(st.sampled_from([None, "fan.png", "fan.jpg", "sub/fan.png"]))
        extra = [] if plot is None else ["--plot", str(Path(folder) / plot)]
        code, out, err = run_cli("forecast", "SP500", *args, *extra)
        _check(code, out, err, args, Path(folder))


@settings(CLI, max_examples=15 if PROFILE == "ci" else 45)
@given(st.data())
def test_backtest_options(data):
    args = _options(data.draw, BACKTEST)
    with tempfile.TemporaryDirectory() as folder:
        code, out, err = run_cli("backtest", "SP500", *args, "--output-dir", str(Path(folder) / "out"))
        _check(code, out, err, args, Path(folder))


@CLI
@given(st.data())
def test_data_check_options(data):
    spec = {"--symbol": choice(("SPY",), ("X",)), "--asset-class": choice(("stock", "crypto"), ("bond",)),
            "--min-rows": ints(1, 100), "--on-duplicate": choice(("error", "first", "last")),
            "--max-jump": floats(1.5, 100)}
    args = _options(data.draw, spec)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "data" / "SPY.csv"
        path.parent.mkdir()
        from tests.conftest import make_ohlcv

        make_ohlcv(30).to_csv(path)
        code, out, err = run_cli("data", "check", str(path), *args)
        path.unlink()
        _check(code, out, err, args, Path(folder))
