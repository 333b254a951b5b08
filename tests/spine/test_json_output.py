"""``--json`` on every command that prints a result: exactly one JSON document on stdout, valid against its
schema in the package (:mod:`marketcast.schemas`), with the real values of small real runs (embedded SP500/NASDAQ, a short backtest's
run store, a trade replay over a few days, a one-recompile log, a two-cell local sweep).

The schemas are checked as any consumer would: a plain :class:`Draft202012Validator` with the package's
registry (:func:`marketcast.schemas.registry`: the packaged files under their own ``$id`` s, no custom resolver). :data:`SCHEMA_OF` names every command that has
``--json`` (discovered from the CLI) and its schema; each run checks its document against that schema."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from jsonschema import Draft202012Validator

from marketcast.commands import COMMANDS, app, main
from marketcast.compile.schema import json_schema, validate_report
from marketcast.console import jsonable
from marketcast.data import load_symbol
from marketcast.runs.store import RunStore
from marketcast.schemas import load, names, registry, schema_id
from tests.compile.test_compile_inputs import RECOMPILE_LOG
from tests.conftest import make_ohlcv

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--windows", "12", "--samples", "32", "--context", "64"]
# gates wide open, so a few days of replay send orders (tests/trade/test_replay.py's OPEN_GATES)
OPEN_GATES = "[trade.gates]\nmin_edge = -1.0\nmin_sharpe = -1000000000.0\nmax_drawdown = 1.01\n"


# a schema refers to another by its $id (forecast -> urn:marketcast:schema:backtest#/$defs/calibration_only)
REGISTRY = registry()

# every command with --json -> its schema (src/marketcast/schemas/NAME.schema.json)
SCHEMA_OF = {
    "backtest": "backtest", "report": "report", "sweep": "sweep", "forecast": "forecast",
    "runs list": "runs_list", "runs show": "runs_show", "runs compare": "comparison", "runs query": "runs_query",
    "runs compact": "runs_compact", "data check": "data_check", "models compare": "models_compare",
    "models download": "models_download", "data fetch": "data_fetch",
    "compile enable": "compile_switch", "compile disable": "compile_switch", "compile mode": "compile_switch",
    "compile status": "compile_status", "compile check": "compile_check", "compile analyze": "compile_analyze",
    "compile compare": "comparison", "trade resume": "trade_resume", "trade promote": "trade_promote",
    "trade reconcile": "trade_reconcile", "trade status": "trade_status", "trade orders": "trade_orders",
    "trade replay": "trade_replay", "finetune": "finetune", "trade run": "trade_run",
}


def json_commands() -> set[str]:
    """Every command (``"runs show"``) that takes ``--json``, found by walking the CLI."""
    import typer

    root, found = typer.main.get_command(app), set()

    def walk(path: str, command) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            walk(f"{path} {name}", sub)
        if any("--json" in p.opts for p in command.params):
            found.add(path)

    for name in COMMANDS:
        walk(name, root.load(name))
    return found


def errors(name: str, doc) -> list[str]:
    """Where ``doc`` departs from the packaged schema NAME."""
    validator = Draft202012Validator(load(name), registry=REGISTRY)
    return [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(doc)]


def run_json(capsys, name: str, *args: str, code: int = 0):
    """Run the CLI; its whole stdout must be one JSON document valid against schema ``name``, the schema
    :data:`SCHEMA_OF` names for the command."""
    words = [a for a in args if not a.startswith("-")]
    assert SCHEMA_OF.get(" ".join(words[:2])) == name or SCHEMA_OF.get(words[0]) == name, args
    capsys.readouterr()
    assert main(list(args)) == code
    doc = json.loads(capsys.readouterr().out)
    assert errors(name, doc) == []
    return doc


def test_every_command_with_json_has_a_schema_with_an_id():
    assert json_commands() == set(SCHEMA_OF)
    assert [load(n)["$id"] for n in names()] == [f"urn:marketcast:schema:{n}" for n in names()]
    assert [schema_id(n) for n in names()] == [load(n)["$id"] for n in names()]
    assert set(SCHEMA_OF.values()) == set(names())


def test_the_schemas_are_json_schemas_and_compile_check_is_generated_from_the_validator():
    assert names() == sorted((
        "backtest", "comparison", "compile_analyze", "compile_check", "compile_status", "compile_switch",
        "data_check", "data_fetch", "finetune", "forecast", "models_compare", "models_download", "report", "runs_compact",
        "runs_list", "runs_query", "runs_show", "sweep", "trade_orders", "trade_promote", "trade_reconcile",
        "trade_replay", "trade_resume", "trade_run", "trade_status"))
    for name in names():
        Draft202012Validator.check_schema(load(name))
    assert load("compile_check") == json_schema()


def test_jsonable_gives_json_types_and_refuses_anything_else(tmp_path):
    value = {"nan": float("nan"), "inf": np.float64("inf"), "n": np.int64(3), "arr": np.array([1.5, np.nan]),
             "when": pd.Timestamp("2024-01-02", tz="UTC"), "nat": pd.NaT, "na": pd.NA, "path": tmp_path, 7: (1, None)}
    assert jsonable(value) == {"nan": None, "inf": None, "n": 3, "arr": [1.5, None],
                               "when": "2024-01-02T00:00:00+00:00", "nat": None, "na": None, "path": str(tmp_path),
                               "7": [1, None]}
    with pytest.raises(TypeError, match="object has no JSON form"):
        jsonable({"x": object()})


def test_forecast(capsys):
    doc = run_json(capsys, "forecast", "forecast", "SP500", "--horizon", "3", "--samples", "64", "--json")
    close = load_symbol("SP500").frame["close"]
    assert (doc["symbol"], doc["model"], doc["asset_class"], doc["samples"]) == ("SP500", "baseline", "stock", 64)
    assert doc["last_bar"] == "2018-12-31T00:00:00+00:00" and doc["last_close"] == pytest.approx(close.iloc[-1])
    assert [s["step"] for s in doc["steps"]] == [1, 2, 3]
    assert doc["steps"][0]["time"] == "2019-01-02T00:00:00+00:00"  # the next NYSE session
    for s in doc["steps"]:
        assert s["close_p10"] <= s["close_p25"] <= s["close_p50"] <= s["close_p75"] <= s["close_p90"]
        assert s["p50_change"] == pytest.approx(s["close_p50"] / doc["last_close"] - 1)
    assert errors("forecast", {**doc, "last_close": str(doc["last_close"])})  # the schema has teeth
    scored = run_json(capsys, "forecast", "forecast", "SP500", "--calibration", "--windows", "20", "--samples", "32",
                      "--json")
    assert (scored["symbol"], scored["runs"], scored["calibration_only"]) == ("SP500", 20, True)
    assert scored["last_settle"] == "2018-12-31T00:00:00+00:00" and scored["calibration"]["windows"] == 20


def test_data_check(tmp_path, capsys):
    frame = make_ohlcv(40)
    frame.to_csv(tmp_path / "ABC.csv")
    doc = run_json(capsys, "data_check", "data", "check", str(tmp_path / "ABC.csv"), "--asset-class", "crypto",
                   "--json")
    assert (doc["symbol"], doc["asset_class"], doc["periods_per_year"], doc["rows"]) == ("ABC", "crypto", 365, 40)
    assert (doc["first"], doc["last"]) == ("2024-01-01T00:00:00+00:00", "2024-02-09T00:00:00+00:00")
    assert doc["median_spacing_s"] == 86400.0 and doc["columns"] == ["open", "high", "low", "close", "volume"]
    assert doc["close_min"] == pytest.approx(frame["close"].min()) and doc["close_max"] == pytest.approx(
        frame["close"].max())


def test_backtest(tmp_path, capsys):
    doc = run_json(capsys, "backtest", "backtest", "SP500", *FAST, "--output-dir", str(tmp_path / "bt"), "--json")
    written = json.loads((tmp_path / "bt" / "latest" / "SP500.json").read_text())
    assert [d["symbol"] for d in doc] == ["SP500"] and doc[0]["runs"] == 12
    assert doc[0]["strategies"]["simple"]["return"] == written["strategies"]["simple"]["return"]
    assert doc[0]["run_id"] in RunStore(os.environ["MARKETCAST_RUN_STORE"]).infos() and "run_id" not in written
    records = [doc[0]["walk_forward"], doc[0]["benchmark"], *doc[0]["strategies"].values()]
    assert all(r["max_drawdown"] <= 0 for r in records) and min(r["max_drawdown"] for r in records) < 0
    assert errors("backtest", [{**doc[0], "benchmark": {**doc[0]["benchmark"], "max_drawdown": 0.1}}])
    skill = run_json(capsys, "backtest", "backtest", "SP500", *FAST, "--calibration-only", "--json")
    assert skill[0]["calibration_only"] is True and skill[0]["skill"]["mase_close"] == doc[0]["metrics"]["mase_close"]
    assert skill[0]["calibration"]["windows"] == 12 and errors("backtest", [{**skill[0], "calibration_only": False}])


def test_models_compare(capsys):
    doc = run_json(capsys, "models_compare", "models", "compare", "--symbols", "SP500", "--models", "baseline,toto2",
                   "--weights", "toto2=random:4m", "--windows", "12", "--samples", "16", "--context", "64", "--json")
    assert [m["model"] for m in doc["models"]] == ["baseline", "toto2"] and doc["symbols"] == ["SP500"]
    assert [m["random_weights"] for m in doc["models"]] == [False, True]
    assert doc["benchmark"]["name"] == "buy_and_hold" and all(m["most_picked"]["forecast_blind"] is False
                                                              for m in doc["models"])
    assert doc["run_id"] in RunStore(os.environ["MARKETCAST_RUN_STORE"]).infos()
    bad = {**doc, "models": [{**doc["models"][0], "random_weights": "no"}]}
    assert errors("models_compare", bad)  # the schema has teeth


def test_models_download(tmp_path, capsys, monkeypatch):
    """Offline, from a Hugging Face cache built here (tests/spine/test_models.py's fixture layout): the folder,
    and --to's layout, as one document on stdout."""
    import huggingface_hub.constants

    from tests.spine.test_models import cache_repo

    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    snapshot = cache_repo(cache, "Datadog/Toto-Open-Base-1.0")
    for name in ("config.json", "model.safetensors"):
        (snapshot / name).write_text(name)
    doc = run_json(capsys, "models_download", "models", "download", "toto", "--json")
    assert doc["folders"] == {"Datadog/Toto-Open-Base-1.0": str(snapshot)} and doc["use"] == ["--model", "toto"]
    target = tmp_path / "weights"
    doc = run_json(capsys, "models_download", "models", "download", "toto", "--to", str(target), "--json")
    assert doc["weights"] == str(target) and (target / "model.safetensors").read_text() == "model.safetensors"
    assert doc["use"] == ["--model", "toto", "--weights", str(target)]
    assert errors("models_download", {**doc, "folders": {}})  # the schema has teeth


def test_data_fetch(tmp_path, capsys, monkeypatch):
    """Against the fake Alpaca server (as tests/sweep/test_fetch.py): the files written, one document."""
    from marketcast.fake_alpaca.server import FakeAlpaca, bars_of

    frame = load_symbol("SP500").frame.loc["2015-01-01":"2015-03-31"].copy()
    frame.index = frame.index + pd.Timedelta(hours=5)  # Alpaca stamps daily bars at midnight New York
    with FakeAlpaca("PKFETCHKEY", "fetch-secret") as fake:
        fake.bars = {"AAPL": bars_of(frame)}
        fake.exchange.clock = "2015-06-01T00:00:00Z"
        monkeypatch.setenv("APCA_API_KEY_ID", "PKFETCHKEY")
        monkeypatch.setenv("APCA_API_SECRET_KEY", "fetch-secret")
        monkeypatch.setenv("APCA_API_DATA_URL", fake.url)
        doc = run_json(capsys, "data_fetch", "data", "fetch", "AAPL", "--start", "2015-01-01", "--end",
                       "2015-03-31", "--out-dir", str(tmp_path / "bars"), "--json")
    assert doc["rows"] == len(frame) == doc["files"][0]["rows"]
    assert doc["files"][0]["file"] == str(tmp_path / "bars" / "AAPL.csv")
    assert pd.Timestamp(doc["files"][0]["first"]) == frame.index[0]
    assert errors("data_fetch", {**doc, "files": []})  # the schema has teeth
    assert doc["source"] == "alpaca" and doc["adjustment"] == "all" and doc["files"][0]["adjustment"] == "all"


def test_data_fetch_from_a_crypto_exchange(tmp_path, capsys, monkeypatch):
    """ccxt:binance against the local fake server of tests/sweep/test_fetch_sources.py: source, adjustment, counts."""
    from marketcast.data.sources import MIRROR_VAR
    from tests.sweep.fake_feeds import FakeFeeds, ohlc

    stamps = pd.date_range("2024-01-01", periods=40, freq="1D", tz="UTC")
    with FakeFeeds() as fake:
        fake.binance["BTC/USDT"] = ohlc(pd.Series(range(100, 140), index=stamps, dtype=float)).drop(stamps[7])
        monkeypatch.setenv(MIRROR_VAR, fake.url)
        doc = run_json(capsys, "data_fetch", "data", "fetch", "BTC/USDT", "--source", "ccxt:binance", "--start",
                       "2024-01-01", "--out-dir", str(tmp_path / "bars"), "--json")
    assert doc["source"] == "ccxt:binance" and doc["adjustment"] == "none" and doc["new"] == doc["rows"] == 39
    assert doc["files"][0]["missing_bars"] == 1 and doc["files"][0]["asset_class"] == "crypto"
    assert errors("data_fetch", {**doc, "source": "bloomberg"})  # the schema has teeth


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A run store holding two short backtests of SP500 and NASDAQ: no fee, and 2 % a side."""
    root = tmp_path_factory.mktemp("json-runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MARKETCAST_RUN_STORE", str(root / "store"))
        for name, fee in (("cheap", "0"), ("dear", "0.02")):
            assert main(["backtest", *FAST, "--fee", fee, "--output-dir", str(root / name)]) == 0
    return root


def test_runs_list_show_query_and_compare(store, capsys):
    where = ["--store", str(store / "store")]
    runs = run_json(capsys, "runs_list", "runs", "list", *where, "--json")
    ids = sorted(RunStore(store / "store").infos())
    assert sorted(r["run_id"] for r in runs) == ids and len(ids) == 2
    assert all((r["kind"], r["ok"], r["failed"], r["symbols"]) == ("backtest", 2, 0, 2) for r in runs)
    fees = run_json(capsys, "runs_query", "runs", "query", "SELECT DISTINCT run_id, fee FROM cells ORDER BY fee",
                    *where, "--json")
    cheap, dear = (r["run_id"] for r in fees)
    assert [r["fee"] for r in fees] == [0.0, 0.02]
    shown = run_json(capsys, "runs_show", "runs", "show", dear, *where, "--json")
    assert shown["run"]["run_id"] == dear and shown["run"]["status"] == "done" and shown["failed"] == []
    sp500 = json.loads((store / "dear" / "latest" / "SP500.json").read_text())
    simple = next(r for r in shown["summary"] if r["symbol"] == "SP500" and r["strategy"] == "simple")
    assert simple["cells"] == 1 and simple["return"] == sp500["strategies"]["simple"]["return"]
    compared = run_json(capsys, "comparison", "runs", "compare", cheap, dear, *where, "--strict", "--json",
                        code=1)  # FAIL: the fee differs, and --strict fails on that
    assert compared["status"] == "FAIL" and compared["runs"] == {"a": cheap, "b": dear}
    assert len(compared["rows"]) == 16 and {r["symbol"] for r in compared["rows"]} == {"SP500", "NASDAQ"}
    files = run_json(capsys, "comparison", "compile", "compare", str(store / "cheap" / "latest" / "SP500.json"),
                     str(store / "dear" / "latest" / "SP500.json"), "--json", code=1)
    assert files["status"] == "FAIL" and files["rows"] == [r for r in compared["rows"] if r["symbol"] == "SP500"]


def test_compile_check(tmp_path, capsys):
    out = tmp_path / "cc"
    capsys.readouterr()
    assert main(["compile", "check", "--model", "baseline", "--symbols", "SP500", "--iterations", "2", "--context",
                 "64", "--horizon", "2", "--samples", "8", "--output-dir", str(out), "--env-file",
                 str(tmp_path / ".env.compile"), "--json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert errors("compile_check", doc) == [] and validate_report(doc) == []
    assert doc == json.loads((out / "compile_check.json").read_text())
    assert (doc["model"], doc["plan"]["symbols"], doc["plan"]["iterations"]) == ("baseline", ["SP500"], 2)
    assert [m["mode"] for m in doc["modes"]] == ["eager"] and doc["modes"][0]["calls"] == 2
    assert f"wrote {out / 'compile_check.json'}" in captured.err  # the files are named on stderr
    assert errors("compile_check", {**doc, "modes": []})  # the generated schema has teeth


def test_compile_analyze(tmp_path, capsys):
    log = tmp_path / "recompile.log"
    log.write_text(RECOMPILE_LOG)
    doc = run_json(capsys, "compile_analyze", "compile", "analyze", str(log), "--json")
    assert (doc["lines"], doc["events"], doc["totals"]["recompile"]) == (4, 1, 1)
    [group] = doc["groups"]
    assert (group["kind"], group["function"], group["values"]) == ("recompile", "forward", ["32", "48"])
    assert group["sources"] == {str(log): 1} and list(doc["causes"]) == ["size_mismatch"]


@pytest.fixture(scope="module")
def trade_state(tmp_path_factory):
    """A paper state folder: SP500 and NASDAQ replayed over 2017-03-01 .. 2017-03-10 with open gates."""
    root = tmp_path_factory.mktemp("json-trade")
    (root / "open.toml").write_text(OPEN_GATES)
    out = subprocess.run([sys.executable, "-m", "marketcast.commands", "trade", "replay", "--from", "2017-03-01", "--to",
                          "2017-03-10", "--config", str(root / "open.toml"), "--state-dir", str(root / "state"),
                          "--exit", "close", "--json"],  # each round trip inside its bar: the first equity is the cash
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
                         timeout=300)
    assert out.returncode == 0, out.stderr
    (root / "replay.json").write_text(out.stdout)
    return root / "state"


def test_trade_replay_resume_and_reconcile(trade_state, capsys):
    replay = json.loads((trade_state.parent / "replay.json").read_text())
    assert errors("trade_replay", replay) == []
    assert (replay["start"], replay["symbols"], replay["cycles"]) == ("2017-03-01", ["SP500", "NASDAQ"], 7)
    assert replay["orders"] >= replay["filled"] > 0 and replay["equity_first"] == 100_000.0
    assert replay["return"] == pytest.approx(replay["equity_last"] / 100_000.0 - 1)
    assert replay["records"] == str(trade_state / "records.jsonl")
    assert errors("trade_replay", {**replay, "cycles": -1})  # the schema has teeth
    resumed = run_json(capsys, "trade_resume", "trade", "resume", "--state-dir", str(trade_state), "--json")
    assert resumed == {"state_dir": str(trade_state), "lifted": 0, "still_halted": []}
    agreed = run_json(capsys, "trade_reconcile", "trade", "reconcile", "--state-dir", str(trade_state), "--json")
    assert (agreed["accepted_broker"], agreed["changes"], agreed["halt_lifted"]) == (False, [], False)
    adopted = run_json(capsys, "trade_reconcile", "trade", "reconcile", "--state-dir", str(trade_state),
                       "--accept-broker", "--json")
    assert adopted["accepted_broker"] is True and adopted["endpoint"] == agreed["endpoint"]


def test_compile_switches_and_status(tmp_path, capsys, monkeypatch):
    for key in ("TOTO_COMPILE", "TOTO_DISABLE_COMPILE", "TOTO_COMPILE_MODE", "KRONOS_COMPILE", "KRONOS_COMPILE_MODE"):
        monkeypatch.delenv(key, raising=False)
    env = str(tmp_path / ".env.compile")
    on = run_json(capsys, "compile_switch", "compile", "enable", "--model", "toto", "--env-file", env, "--json")
    assert on == {"file": env, "updates": {"TOTO_COMPILE": "1", "TOTO_DISABLE_COMPILE": "0"}, "overridden": {}}
    mode = run_json(capsys, "compile_switch", "compile", "mode", "max-autotune", "--env-file", env, "--json")
    assert set(mode["updates"].values()) == {"max-autotune"}
    off = run_json(capsys, "compile_switch", "compile", "disable", "--model", "kronos", "--env-file", env, "--json")
    assert off["updates"] == {"KRONOS_COMPILE": "0"}
    monkeypatch.setenv("KRONOS_COMPILE", "1")
    overridden = run_json(capsys, "compile_switch", "compile", "disable", "--model", "kronos", "--env-file", env,
                          "--json")
    assert overridden["overridden"] == {"KRONOS_COMPILE": "1"}  # the note on stderr says so too
    status = run_json(capsys, "compile_status", "compile", "status", "--env-file", env, "--device", "cuda", "--json")
    rows = {r["key"]: r for r in status["settings"]}
    assert rows["TOTO_COMPILE_MODE"]["value"] == "max-autotune" and rows["TOTO_COMPILE_MODE"]["source"] == "file"
    assert rows["KRONOS_COMPILE"]["source"] == "env" and rows["KRONOS_COMPILE"]["file_value"] == "0"
    assert status["modes"] == {"toto": "max-autotune", "kronos": "max-autotune"} and status["exists"] is True
    assert errors("compile_status", {**status, "modes": {"toto": 1, "kronos": None}})  # teeth


def test_report_and_runs_compact(store, tmp_path, capsys):
    where = ["--store", str(store / "store")]
    run_id = min(RunStore(store / "store").infos())
    made = run_json(capsys, "report", "report", run_id, "SP500", "--output-dir", str(tmp_path / "r"), *where,
                    "--json")
    assert made["run_id"] == run_id and made["tearsheets"] == [str(tmp_path / "r" / run_id / "report.html")]
    assert all(Path(f).is_file() for f in made["files"]) and str(tmp_path / "r" / run_id / "SP500.json") in made["files"]
    compacted = run_json(capsys, "runs_compact", "runs", "compact", run_id, *where, "--json")
    assert compacted["run_id"] == run_id and compacted["files_after"] <= compacted["files_before"]
    again = run_json(capsys, "runs_compact", "runs", "compact", run_id, *where, "--json")
    assert again["files_before"] == again["files_after"] == compacted["files_after"] and again["rows"] is None


def test_sweep(tmp_path, capsys, monkeypatch):
    from tests.sweep.helpers import small_spec, write_bars

    write_bars(tmp_path / "bars", ["AAA"])
    (tmp_path / "spec.toml").write_text(small_spec())
    monkeypatch.chdir(tmp_path)
    done = run_json(capsys, "sweep", "sweep", "spec.toml", "--local", "--store", str(tmp_path / "store"), "--json")
    assert (done["planned"], done["ok"], done["failed"], done["failures"]) == (2, 2, 0, [])
    assert done["run_id"] in RunStore(tmp_path / "store").infos() and done["selection"]


def test_trade_status_and_orders(trade_state, capsys):
    status = run_json(capsys, "trade_status", "trade", "status", "--state-dir", str(trade_state), "--json")
    orders = run_json(capsys, "trade_orders", "trade", "orders", "--state-dir", str(trade_state), "--json")
    journal, records = status["journal"], status["records"]
    assert journal["cycles"] == 7 and journal["first_bar"] == "2017-03-01T00:00:00+00:00"
    assert journal["orders_submitted"] == sum(o["status"] == "submitted" for o in orders) > 0
    assert journal["orders_filled"] == sum(o["filled_qty"] > 0 for o in orders if o["kind"] == "entry") > 0
    assert {o["symbol"] for o in orders} == {"SP500", "NASDAQ"} and set(status["strategies"]) == {"SP500", "NASDAQ"}
    assert (records["mode"], records["broker"], records["equity_first"]) == ("replay", "paper", 100_000.0)
    assert list(records["mean_forecast_latency_ms"]) == ["baseline"] and status["halts"] == []
    assert status["bound_to"]["account_id"].startswith("paper-")
    assert all(math.isfinite(o["qty"]) and o["decision_ts"] >= "2017-03-01" for o in orders)
    # one drawdown sign across schemas: a fall is negative, as in the backtest's JSON; a positive one is refused
    assert records["max_drawdown"] <= 0
    assert errors("trade_status", {**status, "records": {**records, "max_drawdown": 0.1}})


def test_trade_status_of_a_folder_with_records_only(tmp_path, capsys):
    """No journal yet (the loop writes its records first): the status is the records' alone; an empty folder is
    no state folder at all (one line, exit 2: tests/trade/test_blotter.py)."""
    (tmp_path / "records.jsonl").write_text('{"decision_ts": "2020-01-02", "equity": 5}\n')
    status = run_json(capsys, "trade_status", "trade", "status", "--state-dir", str(tmp_path), "--json")
    assert status["journal"] is None and status["records"]["equity_last"] == 5 and status["refused"] == []


def test_trade_status_for_people_shows_no_python_repr(trade_state, capsys):
    capsys.readouterr()
    assert main(["trade", "status", "--state-dir", str(trade_state)]) == 0
    out = capsys.readouterr().out
    assert "mean_forecast_latency_ms" in out and "orders_submitted" in out
    for repr_mark in ("{'", "':", "None", "[]"):
        assert repr_mark not in out, repr_mark
    latency = next(line for line in out.splitlines() if "mean_forecast_latency_ms" in line)
    assert latency.split("│")[2].split()[0] == "baseline"  # "baseline 6.05", not {'baseline': 6.05}


def test_trade_promote(tmp_path, capsys):
    """Hand-made paired decisions (the journal's own tables, one a day, no journalled cost): the JSON's statistics
    are the sequential test's on the thirty daily differences."""
    from datetime import date, timedelta

    from marketcast.trade.journal import sequential
    from marketcast.trade.journal.db import transaction
    from marketcast.trade.journal.state import Journal

    diff = np.tile([0.01, 0.03, -0.004, 0.003, -0.02], 6)  # shadow - live, one a day
    live = np.tile([0.01, -0.02, 0.005, 0.0, 0.004], 6)
    shadow = live + diff
    journal = Journal(tmp_path / "journal.db")
    with transaction(journal.conn) as c:
        for i, (a, b) in enumerate(zip(live, shadow)):
            ts = f"{date(2024, 1, 2) + timedelta(days=i)}T00:00:00+00:00"
            for role, model, name, pnl in (("live", "base", "baseline", a), ("shadow", "cand", "toto2", b)):
                c.execute("INSERT INTO shadow_decisions (decision_ts, symbol, role, model, side, close, pnl, settled_ts, "
                          "forecaster) VALUES (?, 'SP500', ?, ?, 1, 100.0, ?, ?, ?)", (ts, role, model, float(pnl), ts,
                                                                                         name))
    journal.close()
    test = sequential.evaluate(shadow - live, 0.05)
    assert 1.0 < test.e_value < 20.0 and test.low < 0
    state = str(tmp_path)
    refused = run_json(capsys, "trade_promote", "trade", "promote", "--state-dir", state, "--min-decisions", "2",
                       "--json", code=1)
    assert refused["promoted"] is False and refused["n"] == 30 and refused["previous"] is None
    assert refused["e_value"] == pytest.approx(test.e_value) and refused["p"] == pytest.approx(1 / test.e_value)
    assert refused["mean_diff"] == pytest.approx(0.0038) and refused["days"] == 30 and refused["threshold"] == 20.0
    assert refused["interval"] == [pytest.approx(test.low), None]  # one-sided: a lower bound only
    assert refused["weights"] == "cand" and refused["model"] == "toto2"
    assert refused["shadow_pnl"] == pytest.approx(shadow.sum()) and refused["live_pnl"] == pytest.approx(live.sum())
    assert refused["reason"].startswith("not promoted: the shadow does not beat the live model on pnl (e-value below 20")
    assert refused["metric"] == "pnl"
    few = run_json(capsys, "trade_promote", "trade", "promote", "--state-dir", state, "--json", code=1)
    assert few["reason"].startswith("not promoted: 30 of 60 decisions needed") and few["min_decisions"] == 60
    done = run_json(capsys, "trade_promote", "trade", "promote", "--state-dir", state, "--min-decisions", "2",
                    "--alpha", "0.95", "--json")  # threshold 1/0.95 = 1.053, below the e-value
    assert done["promoted"] is True and done["reason"].startswith("promoted cand: n=30") and done["alpha"] == 0.95
    empty = tmp_path / "empty"
    Journal(empty / "journal.db").close()
    none = run_json(capsys, "trade_promote", "trade", "promote", "--state-dir", str(empty), "--json", code=1)
    assert none["weights"] is None and none["n"] == none["days"] == 0 and none["p"] == none["e_value"] == 1.0


def test_finetune(tmp_path, capsys):
    """A tiny Toto 2.0 tuned on a planted cycle, with --evaluate: the JSON carries tuning.json's numbers and the
    paired test's deltas; progress and the summary lines went to stderr."""
    from marketcast.forecast.toto2.loading import save_checkpoint
    from marketcast.forecast.toto2.model import random_model
    from tests.finetune.conftest import TOTO2_TUNE, UNTIL, planted, tiny_toto2_config

    base = save_checkpoint(random_model(tiny_toto2_config(), 0), tmp_path / "base")
    (tmp_path / "bars").mkdir()
    planted().to_csv(tmp_path / "bars" / "SYN.csv")
    out = tmp_path / "tuned"
    capsys.readouterr()
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny steps: two threads on a busy machine mostly wait for each other (30x slower)
    try:
        assert main(["finetune", "--model", "toto2", "--weights", str(base), "--data-dir", str(tmp_path / "bars"),
                     "--symbols", "SYN", "--until", UNTIL, *TOTO2_TUNE, "--out", str(out), "--evaluate",
                     "--samples", "16", "--json"]) == 0
    finally:
        torch.set_num_threads(threads)
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert errors("finetune", doc) == []
    record = json.loads((out / "tuning.json").read_text())
    assert (doc["out"], doc["model"], doc["until"], doc["symbols"], doc["lora"]) == (str(out), "toto2", UNTIL,
                                                                                     ["SYN"], None)
    assert doc["steps"] == record["steps"] == 60 and doc["loss"] == record["loss"]
    assert "finetune: step 60/60" in captured.err and f"weights: {out}" in captured.err
    (row,) = doc["evaluation"]["symbols"]
    crps = row["crps"]
    assert row["windows"] == 98 and crps["delta"] == pytest.approx(crps["tuned"] - crps["base"])
    pooled = doc["evaluation"]["pooled"]
    assert pooled["mean_diff"] == pytest.approx(-crps["delta"]) and pooled["ci_low"] < pooled["mean_diff"]
    assert 0 <= pooled["t_p"] <= 1 and doc["evaluation"]["tuned_run"] in RunStore(
        os.environ["MARKETCAST_RUN_STORE"]).infos()
    assert row["mase"]["baseline"] > 0 and doc["evaluation"]["baseline_run"] in RunStore(
        os.environ["MARKETCAST_RUN_STORE"]).infos()
    against = doc["evaluation"]["pooled_vs_baseline"]["tuned"]  # baseline - tuned on the same windows
    assert against["mean_diff"] == pytest.approx(crps["baseline"] - crps["tuned"])
    assert errors("finetune", {**doc, "evaluation": None}) == []  # no --evaluate
    assert errors("finetune", {**doc, "lora": 0}) and errors("finetune", {**doc, "evaluation": {}})  # teeth
    without = {**doc["evaluation"], "symbols": [{**row, "crps": {k: v for k, v in crps.items() if k != "baseline"}}]}
    assert errors("finetune", {**doc, "evaluation": without})  # the baseline row is required


def test_trade_run_dry_run_and_once(tmp_path):
    """``trade run --json``: stdout is the one document, the same orders the table prints, logs on stderr; a
    continuous run has no end to print at, so --json without --once or --dry-run is one line and exit 2."""
    from marketcast.data import load_symbol

    data, state, clock = tmp_path / "data", tmp_path / "state", tmp_path / "clock"
    data.mkdir()
    for sym in ("SP500", "NASDAQ"):  # as tests/trade/test_cli.py: fresh data whose signals pass the default gates
        load_symbol(sym).frame.loc[:"2018-07-20"].to_csv(data / f"{sym}.csv")
    clock.write_text("2018-07-20T21:30:00Z")
    env = {k: v for k, v in os.environ.items() if k != "ADD_LATEST"}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "marketcast.commands", "trade", "run", "--symbols", "SP500,NASDAQ",
                               "--data-dir", str(data), "--state-dir", str(state), "--clock-file", str(clock), *args],
                              check=False, capture_output=True, text=True, cwd=tmp_path, timeout=300,
                              env={**env, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "250"})

    refused = run("--json")
    assert refused.returncode == 2 and refused.stdout == "" and not state.exists()
    assert refused.stderr.strip().splitlines()[-1].endswith("--json needs --once or --dry-run")
    dry_out = run("--dry-run", "-v", "--json")
    assert dry_out.returncode == 0, dry_out.stderr
    dry = json.loads(dry_out.stdout)
    assert errors("trade_run", dry) == [] and not state.exists()
    assert "INFO" in dry_out.stderr  # -v's log lines stay on stderr
    [plan] = dry["cycles"]
    planned = [r["client_order_id"] for r in plan["plan"] if r["client_order_id"]]
    assert (dry["mode"], dry["dry_run"], dry["exit_code"], plan["submitted"]) == ("paper", True, 0, [])
    assert len(planned) >= 1 and {r["symbol"] for r in plan["plan"]} == {"SP500", "NASDAQ"}
    assert "2018-07-20" in plan["title"] and "dry run, nothing sent" in plan["title"]

    once_out = run("--once", "--json")
    assert once_out.returncode == 0, once_out.stderr
    once = json.loads(once_out.stdout)
    assert errors("trade_run", once) == [] and once["dry_run"] is False
    [cycle] = once["cycles"]
    assert cycle["submitted"] == planned  # the dry run's plan is what the cycle sent
    assert [r["client_order_id"] for r in cycle["plan"] if r["client_order_id"]] == planned
    assert cycle["equity"] == 100_000.0  # nothing has filled yet: the paper account's starting cash
    assert errors("trade_run", {**once, "exit_code": -1})  # the schema has teeth
