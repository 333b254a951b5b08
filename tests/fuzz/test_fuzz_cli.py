"""Property-based fuzzing of the CLI's options: any value of any option ends in exit 0, or in exit 2 with one
line naming the option and nothing written. Bounded, derandomized examples on the embedded data."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.test_fuzz_loaders import run_cli

CLI = settings(derandomize=True, database=None, deadline=None, max_examples=60,
               suppress_health_check=[HealthCheck.too_slow])
TEXT = st.sampled_from(["", "abc", "1e3", "-0", "\uff11", "nan", "inf", "1.5", "--", "0x10"])
DEVICE_OK = re.compile(r"^(cpu|cuda(:\d+)?)$")


def ints(lo: int, hi: int) -> st.SearchStrategy:
    return st.integers(lo, hi).map(str) | TEXT


def floats() -> st.SearchStrategy:
    return st.floats(-2, 2).map(repr) | st.sampled_from(["nan", "inf", "-inf", "1e300"]) | TEXT


def choice(*valid: str) -> st.SearchStrategy:
    return st.sampled_from(valid) | TEXT | st.text(max_size=8)


def _options(draw, spec: dict) -> list[str]:
    args = []
    for name, values in spec.items():
        if draw(st.booleans()):
            value = draw(values)
            args += [f"{name}={value}"]  # '=' keeps a value like '--' or '-0' a value
    return args


FORECAST = {
    "--horizon": ints(-2, 40), "--samples": ints(-2, 600), "--context": ints(-2, 6000), "--seed": ints(-3, 10**9),
    "--model": choice("baseline", "prophet"), "--device": choice("cpu", "cuda", "cuda:0", "bogus"),
    "--dtype": choice("float32", "bfloat16", "bogus"), "--weights": choice("auto", "random", "x/y"),
}
BACKTEST = {
    "--windows": ints(-2, 12) | st.just("99999"), "--samples": ints(-2, 64), "--context": ints(-2, 300),
    "--seed": ints(-3, 99), "--point": choice("median", "mean", "p90", "trimmed_mean_10", "quantile_2"),
    "--fill-mode": choice("touch", "penetrate"), "--same-bar": choice("pessimistic", "nearest"),
    "--fee": floats(), "--spread": floats(), "--ci-low": floats(), "--ci-high": floats(),
    "--ci-multiplier": floats(), "--strategies": choice("simple", "simple,maxdiff", "moon", ","),
    "--asset-class": choice("stock", "crypto", "bond"), "--device": choice("cpu", "bogus"),
    "--dtype": choice("float32", "bogus"),
}


def _check(code: int, out: str, err: str, args: list[str], folder: Path) -> None:
    assert code in (0, 2), (code, args, err)
    if code == 2:
        assert err.startswith("error:") and len(err.strip().splitlines()) == 1, (args, err)
        assert not [p for p in folder.rglob("*") if p.is_file()], (args, list(folder.rglob("*")))
    for arg in args:  # a device or dtype no model accepts is refused, whatever the model
        name, _, value = arg.partition("=")
        if (name == "--device" and not DEVICE_OK.match(value)) or (name == "--dtype" and value not in (
                "float32", "bfloat16")):
            assert code == 2 and name in err, (args, err)


@CLI
@given(st.data())
def test_forecast_options(data):
    args = _options(data.draw, FORECAST)
    with tempfile.TemporaryDirectory() as folder:
        plot = data.draw(st.sampled_from([None, "fan.png", "fan.jpg", "sub/fan.png"]))
        extra = [] if plot is None else ["--plot", str(Path(folder) / plot)]
        code, out, err = run_cli("forecast", "SP500", *args, *extra)
        _check(code, out, err, args, Path(folder))


@settings(CLI, max_examples=25)
@given(st.data())
def test_backtest_options(data):
    args = _options(data.draw, BACKTEST)
    with tempfile.TemporaryDirectory() as folder:
        code, out, err = run_cli("backtest", "SP500", *args, "--output-dir", str(Path(folder) / "out"))
        _check(code, out, err, args, Path(folder))


@CLI
@given(st.data())
def test_data_check_options(data):
    spec = {"--symbol": choice("SP500", "X"), "--asset-class": choice("stock", "crypto"),
            "--min-rows": ints(-2, 100)}
    args = _options(data.draw, spec)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "data" / "SPY.csv"
        path.parent.mkdir()
        from tests.conftest import make_ohlcv

        make_ohlcv(30).to_csv(path)
        code, out, err = run_cli("data", "check", str(path), *args)
        path.unlink()
        _check(code, out, err, args, Path(folder))
