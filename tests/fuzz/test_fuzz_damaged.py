"""Nothing half-written: damaged bar files, sweep specs, trade configs and run stores, run through the
commands that read them (``data check``, ``backtest --data-dir``, ``forecast --data-dir``, ``sweep``, ``trade
replay --config``, ``runs list/show/query``, ``report``).

Each must end with exit 0, or 2/3 and exactly one ``error:`` line (``warning:`` lines beside it), never a
traceback or a hang, and create no file outside the example's output folder (see :mod:`tests.fuzz.harness`).
Bounded and derandomized by default; ``MARKETCAST_FUZZ=long`` (``make fuzz``) runs >= 2,000 examples.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import Phase, event, example, given, note, settings
from hypothesis import strategies as st

from tests.fuzz import harness
from tests.fuzz.damage import (
    BAD_SYMBOLS,
    WILD_VALUES,
    damaged_bars,
    parquet_with_bad_pandas_metadata,
    store_damage,
    toml_damage,
    toml_text,
)
from tests.fuzz.harness import check, counted, fuzz_settings, run, sandbox

SYMBOL = "ZZZ"
FAST_BACKTEST = ("--windows", "3", "--samples", "8", "--context", "20", "--no-spa")


def _on_bad_line() -> tuple[str, ...]:
    """``data check --on-bad-line``'s choices (none before the loaders had the option)."""
    from marketcast.data import load, read

    return tuple(getattr(read, "ON_BAD_LINE", None) or getattr(load, "ON_BAD_LINE", ()))


def _bars(root: Path, file) -> Path:
    folder = root / "in" / "bars"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{SYMBOL}{file.suffix}"
    path.write_bytes(file.data)
    return path


def _given_bars(file) -> dict:
    for label in file.labels:
        event(f"bars: {label}")
    event(f"bars: {file.suffix}")
    head = file.data[:600]
    return {"labels": list(file.labels), "suffix": file.suffix, "size": len(file.data),
            "head": head.decode("utf-8", "backslashreplace") if file.suffix == ".csv" else head.hex()}


# --- bar files -----------------------------------------------------------------------------------------

@fuzz_settings(ci=50, long=450)
@given(damaged_bars(), st.data())
def test_data_check_of_damaged_bars(file, data):
    counted("data check")
    with sandbox() as root:
        path = _bars(root, file)
        extra = []
        choices = _on_bad_line()
        if choices and data.draw(st.booleans()):
            extra = [f"--on-bad-line={data.draw(st.sampled_from(choices))}"]
            event(extra[0])
        extra += data.draw(st.sampled_from([[], ["--on-duplicate=last"], ["--on-duplicate=first"]]))
        o = run(root, ["data", "check", str(path), *extra])
        note(repr(o))
        check(o, _given_bars(file))


@fuzz_settings(ci=30, long=350)
@given(damaged_bars())
@example(parquet_with_bad_pandas_metadata())  # found: a KeyError out of pyarrow's pandas metadata
def test_backtest_of_damaged_bars(file):
    counted("backtest --data-dir")
    with sandbox() as root:
        path = _bars(root, file)
        o = run(root, ["backtest", SYMBOL, "--data-dir", str(path.parent), *FAST_BACKTEST,
                       "--output-dir", str(root / "out" / "bt")])
        note(repr(o))
        check(o, _given_bars(file))


@fuzz_settings(ci=30, long=350)
@given(damaged_bars(), st.booleans())
@example(parquet_with_bad_pandas_metadata(), False)
def test_forecast_of_damaged_bars(file, plot):
    counted("forecast --data-dir")
    with sandbox() as root:
        path = _bars(root, file)
        extra = ["--plot", str(root / "out" / "fan.png")] if plot else []
        o = run(root, ["forecast", SYMBOL, "--data-dir", str(path.parent), "--horizon", "2", "--samples", "16",
                       *extra])
        note(repr(o))
        check(o, _given_bars(file))


@fuzz_settings(ci=20, long=250)
@given(damaged_bars(), st.sampled_from([("2024-01-05", "2024-01-10"), ("2021-07-02", "2021-07-09"),
                                        ("2003-03-05", "2003-03-12")]))
def test_trade_replay_of_damaged_bars(file, days):
    counted("trade replay --data-dir")
    with sandbox() as root:
        path = _bars(root, file)
        o = run(root, ["trade", "replay", "--symbols", SYMBOL, "--data-dir", str(path.parent), "--from", days[0],
                       "--to", days[1], "--state-dir", str(root / "out" / "state")], timeout=60)
        note(repr(o))
        check(o, _given_bars(file))


# --- sweep specs ----------------------------------------------------------------------------------------

SPEC = {
    "name": "fz",
    "data": {"symbols": ["AAA", "BBB"], "dir": "bars", "on_duplicate": "error"},
    "options": {"windows": 3, "num_samples": 8, "context": 20, "spa": False, "bootstrap_reps": 50},
    "grid": {"seed": [0, 1], "fill_mode": ["touch", "penetrate"]},
    "settings": [{"name": "narrow", "ci_band": [0.45, 0.55]}],
    "models": {"baseline": {"dtype": "float32"}},
    "ray": {"actors": 1, "flush_cells": 4},
}
SPEC_PATHS = [("name",), ("data", "symbols"), ("data", "dir"), ("data", "on_duplicate"), ("data", "asset_class"),
              ("data", "periods_per_year"), ("options", "windows"), ("options", "num_samples"), ("options", "context"),
              ("options", "seed"), ("options", "ci_band"), ("options", "fee"), ("options", "strategies"),
              ("options", "cscv_splits"), ("options", "selection"), ("grid", "seed"), ("grid", "fill_mode"),
              ("grid", "model"), ("grid", "windows"), ("settings",), ("models", "baseline", "dtype"),
              ("models", "toto"), ("ray", "actors"), ("ray", "flush_seconds"), ("ray", "max_in_flight"),
              ("data",), ("options",), ("grid",), ("models",), ("ray",)]
SPEC_UNKNOWN = [(), ("data",), ("options",), ("grid",), ("ray",), ("models", "baseline")]


@st.composite
def specs(draw) -> tuple[bytes, dict]:
    text, given = draw(toml_damage(SPEC, SPEC_PATHS, SPEC_UNKNOWN))
    kind = draw(st.integers(0, 5))
    if kind <= 1:  # symbols a path can be made of, or a negative seed
        import tomllib

        try:
            doc = tomllib.loads(text.decode())
        except (ValueError, UnicodeDecodeError):
            return text, given
        if kind == 0 and isinstance(doc.get("data"), dict):
            doc["data"]["symbols"] = ["AAA", draw(st.sampled_from(BAD_SYMBOLS))]
            given["labels"].append(f"symbol {doc['data']['symbols'][1]!r}")
        elif kind == 1 and isinstance(doc.get("grid"), dict):
            seed = draw(st.sampled_from([-1, -(2 ** 63), -(2 ** 64), 2 ** 63]))
            doc["grid"]["seed"] = [0, seed]
            given["labels"].append(f"seed {seed}")
        text = toml_text(doc).encode()
    return text, given


def _spec_folder(root: Path, text: bytes) -> Path:
    from tests.sweep.helpers import write_bars

    write_bars(root / "in" / "bars", ["AAA", "BBB"], n=40)
    spec = root / "in" / "spec.toml"
    spec.write_bytes(text)
    return spec


@pytest.fixture
def no_ray(monkeypatch):
    """A spec that passes every check raises ReachedRay where the sweep would start Ray."""
    from marketcast.sweep import runner

    def connect(*_args, **_kwargs):
        raise harness.ReachedRay()

    monkeypatch.setattr(runner, "connect", connect)


@fuzz_settings(ci=60, long=500)
@given(specs())
@example((toml_text({**SPEC, "data": {**SPEC["data"], "dir": 3}}).encode(), {"labels": ["value data.dir"]}))
@example((b'[trade]\ndevice = -1\n', {"labels": ["not a spec: a trade config"]}))
def test_sweep_spec_is_checked_before_ray(no_ray, spec):
    counted("sweep (spec checked, Ray stubbed)")
    text, given = spec
    for label in given["labels"]:
        event(f"spec: {label.split(' ', 1)[0]}")
    with sandbox() as root:
        path = _spec_folder(root, text)
        o = run(root, ["sweep", str(path), "--store", str(root / "out" / "runs")])
        note(repr(o))
        given["spec"] = text.decode("utf-8", "backslashreplace")
        check(o, given)


@pytest.fixture(scope="module")
def ray_address():
    """One local Ray for the few sweeps that run for real; they join it with --address."""
    import ray

    from marketcast.sweep.execute import connect

    started = connect(ray, address=None, num_cpus=2)
    yield ray.get_runtime_context().gcs_address
    if started:
        ray.shutdown()


HUGE_WINDOWS = toml_text({**SPEC, "options": {**SPEC["options"], "windows": 2 ** 64}}).encode()


@settings(fuzz_settings(ci=2, long=60), phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(specs())
@example((HUGE_WINDOWS, {"labels": ["value options.windows"]}))  # found: a failed cell's row overflowed int64
def test_sweep_of_damaged_specs_on_ray(ray_address, spec):
    """The same specs, run for real (bounded: every valid spec starts Ray, so CI runs the found example and two
    more; no shrinking, a shrink step can cost a sweep). Exit 1 means failed cells."""
    counted("sweep (on Ray)")
    text, given = spec
    with sandbox() as root:
        path = _spec_folder(root, text)
        o = run(root, ["sweep", str(path), "--store", str(root / "out" / "runs"), "--address", ray_address],
                timeout=120)
        note(repr(o))
        given["spec"] = text.decode("utf-8", "backslashreplace")
        check(o, given, codes=(0, 1, 2, 3))


# --- trade configs --------------------------------------------------------------------------------------

CONFIG = {"trade": {
    "symbols": ["SP500", "NASDAQ"], "broker": "paper", "model": ["baseline"], "dtype": "float32", "seed": 0,
    "fee": 0.0005, "interval_s": 60.0,
    "strategy": {"SP500": "maxdiff"},
    "selection": {"min_trades": 10},
    "gates": {"min_edge": -1, "min_sharpe": -1e9, "max_drawdown": 1.01, "min_dollar_volume": 0.0,
              "require_quote": False},
    "portfolio": {"max_positions": 2, "max_exposure": 1.0, "per_symbol_cap": 0.5},
    "risk": {"max_daily_loss": 0.03, "max_orders_per_cycle": 10, "max_orders_per_day": 20,
             "max_notional_per_order": 0.0, "flatten_on_halt": False},
    "data": {"on_duplicate": "error", "stale_after_s": 0.0, "max_spread": 0.01},
    "alerts": {"max_latency_s": 30.0, "min_sharpe": -10.0},
}}
CONFIG_PATHS = [("trade", *key.split(".")) for key in (
    "symbols", "broker", "state_dir", "data_dir", "data.on_duplicate", "model", "weights", "device", "dtype", "seed",
    "strategy", "strategy.SP500", "selection.min_trades", "add_latest", "interval_s", "fee", "gates.min_edge",
    "gates.min_sharpe", "gates.max_drawdown", "gates.min_dollar_volume", "gates.require_quote",
    "portfolio.max_positions", "portfolio.max_exposure", "portfolio.per_symbol_cap", "risk.max_daily_loss",
    "risk.max_orders_per_cycle", "risk.max_orders_per_day", "risk.max_notional_per_order",
    "risk.max_notional_per_symbol", "risk.flatten_on_halt", "data.stale_after_s", "data.max_quote_age_s",
    "data.max_spread", "alerts.webhook", "alerts.max_latency_s", "alerts.max_recompiles", "alerts.min_return",
    "gates", "risk", "portfolio")] + [("trade",)]
CONFIG_UNKNOWN = [(), ("trade",), ("trade", "risk"), ("trade", "gates"), ("trade", "strategy")]
NAMED_VALUES = st.sampled_from([
    ["../X"], ["SP500", "SP500"], [], "SP500,NASDAQ", "ETHUSD", ["toto", "bogus"], "cuda:x", "mps", "bfloat16",
    "ftp://x", "http://127.0.0.1:9/hook", "../../escape", "/nonexistent/bars", {"SP500": "moon"}, {"../X": "simple"},
])


@st.composite
def configs(draw) -> tuple[bytes, dict]:
    text, given = draw(toml_damage(CONFIG, CONFIG_PATHS, CONFIG_UNKNOWN))
    if draw(st.integers(0, 2)) == 0:  # values that name things: symbols, models, devices, folders
        import tomllib

        try:
            doc = tomllib.loads(text.decode())
        except (ValueError, UnicodeDecodeError):
            return text, given
        if isinstance(doc.get("trade"), dict):
            key = draw(st.sampled_from(["symbols", "model", "device", "dtype", "data_dir", "strategy", "weights"]))
            doc["trade"][key] = draw(NAMED_VALUES | WILD_VALUES)
            given["labels"].append(f"named {key} = {doc['trade'][key]!r}")
            text = toml_text(doc).encode()
    return text, given


@fuzz_settings(ci=25, long=350)
@given(configs())
@example((b'[trade]\ndevice = -1\n', {"labels": ["value trade.device"]}))  # found: a TypeError, not one line
def test_trade_replay_of_damaged_configs(config):
    counted("trade replay --config")
    text, given = config
    for label in given["labels"]:
        event(f"config: {label.split(' ', 1)[0]}")
    with sandbox() as root:
        path = root / "in" / "marketcast.toml"
        path.write_bytes(text)
        o = run(root, ["trade", "replay", "--from", "2017-12-18", "--to", "2017-12-22", "--config", str(path),
                       "--state-dir", str(root / "out" / "state")], timeout=60)
        note(repr(o))
        given["config"] = text.decode("utf-8", "backslashreplace")
        check(o, given)


# --- run stores -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory) -> Path:
    """A real run store: two short baseline backtests of the embedded bars (made once)."""
    root = tmp_path_factory.mktemp("fuzz-store")
    for d in ("in", "out", "cwd", "tmp"):
        (root / d).mkdir()
    store = root / "store"
    for seed in ("0", "1"):
        o = run(root, ["backtest", "SP500", "--windows", "12", "--samples", "8", "--context", "32", "--no-spa",
                       "--seed", seed, "--output-dir", str(root / "out" / seed)],
                env={"MARKETCAST_RUN_STORE": str(store)}, timeout=120)
        assert o.code == 0, o
    assert len([p for p in store.iterdir() if p.is_dir()]) == 2, list(store.rglob("*"))
    return store


QUERIES = ("SELECT count(*) AS n FROM results", "SELECT * FROM cells", "SELECT symbol, strategy, sharpe FROM results "
           "ORDER BY sharpe DESC LIMIT 3", "SELECT run_id, count(*) FROM rows GROUP BY run_id")


@st.composite
def store_commands(draw, store: Path, out: Path) -> list[str]:
    kind = draw(st.sampled_from(["list", "list --json", "show", "show --json", "query", "report", "report html"]))
    run_ref = draw(st.sampled_from(["latest", "backtest", "b"]))
    s = ["--store", str(store)]
    if kind.startswith("list"):
        return ["runs", "list", *s, *kind.split()[1:]]
    if kind.startswith("show"):
        return ["runs", "show", run_ref, *s, *kind.split()[1:]]
    if kind == "query":
        extra = ["--run", run_ref] if draw(st.booleans()) else []
        return ["runs", "query", draw(st.sampled_from(QUERIES)), *extra, *s]
    html = ["--html"] if kind == "report html" else ["--no-html"]
    return ["report", run_ref, "-o", str(out / "report"), *html, *s]


@fuzz_settings(ci=30, long=450)
@given(st.data())
def test_runs_commands_on_a_damaged_store(tiny_store, data):
    counted("runs list/show/query, report")
    with sandbox() as root:
        store = root / "in" / "store"
        shutil.copytree(tiny_store, store)
        labels = data.draw(store_damage(store))
        for label in labels:
            event(f"store: {label.split(' ', 1)[0]}")
        args = data.draw(store_commands(store, root / "out"))
        event(f"command: {' '.join(args[:2])}")
        o = run(root, args, timeout=60)
        note(repr(o))
        # the run ids differ by session: name the damaged files by their place, not their id
        check(o, {"labels": labels, "store": sorted(str(p.relative_to(store)) for p in store.rglob("*"))})


# --- the strategies reach every case of the issue -------------------------------------------------------

def test_the_damage_covers_every_case_of_the_issue():
    """Bars: truncation, bit flips, wrong types, duplicated and reversed times, NaN/inf, 1e308, non-UTF-8, a BOM,
    mixed zones, an extra field, an unclosed quote, in CSV and Parquet; specs: wrong types, negative seeds,
    unknown keys, ../X; configs: damaged values; stores: truncated, bit-flipped, zeroed and deleted files."""
    from hypothesis import settings as hsettings

    from tests.fuzz.damage import BYTE_DAMAGE, CSV_DAMAGE, STORE_DAMAGE, TABLE_DAMAGE

    seen: set[str] = set()
    quick = hsettings(derandomize=True, database=None, deadline=None, max_examples=200,
                      suppress_health_check=list(harness.HealthCheck))

    @quick
    @given(damaged_bars())
    def bars(file):
        seen.update(f"bars {label}" for label in file.labels)
        seen.add(f"bars {file.suffix}")
        if file.suffix == ".parquet" and {"truncated", "bit flip"} & set(file.labels):
            seen.add("bars damaged parquet")

    @quick
    @given(specs())
    def spec_cases(spec):
        text, given_ = spec
        for label in given_["labels"]:
            seen.add(f"spec {label.split(' ')[0]}")
            if label.startswith("symbol '../X'"):
                seen.add("spec ../X")
            if label.startswith("seed -"):
                seen.add("spec negative seed")

    @quick
    @given(configs())
    def config_cases(config):
        seen.update(f"config {label.split(' ')[0]}" for label in config[1]["labels"])

    bars()
    spec_cases()
    config_cases()
    wanted = ({f"bars {k}" for k in (*TABLE_DAMAGE, *CSV_DAMAGE, *BYTE_DAMAGE, ".csv", ".parquet")}
              | {"bars damaged parquet", "spec value", "spec unknown", "spec remove", "spec text", "spec ../X",
                 "spec negative seed", "config value", "config unknown", "config text", "config named"})
    assert wanted <= seen, sorted(wanted - seen)
    assert set(STORE_DAMAGE) >= {"truncated", "bit flip", "zero bytes", "deleted"}
