"""Layered settings (defaults < marketcast.toml < .env.compile < environment < flags), each value with where it
came from; ``trade run --print-config`` and ``--help`` show them; bad values are one line naming the layer."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from marketcast.commands import trade_settings as cfg
from marketcast.commands.trade_settings import SECTION, SETTINGS, config_rows
from marketcast.errors import ConfigError
from marketcast.settings import Setting, items, number, pairs, resolve, text
from tests.trade.helpers import trade_main

SPECS = (
    Setting("symbols", ("A",), items(text), "symbols", "--symbols"),
    Setting("risk.max_daily_loss", 0.05, number(0.0, 1.0), "loss", "--max-daily-loss", float),
    Setting("risk.max_orders_per_day", 100, number(0, integer=True), "orders", "--max-orders-per-day", int),
    Setting("strategy", {}, pairs(str.upper, text), "pins", "--strategy", list[str]),
    Setting("add_latest", None, number(), "x", env=("ADD_LATEST",)),
)


def test_each_layer_overrides_the_one_below_and_says_where_it_came_from(tmp_path):
    toml = tmp_path / "marketcast.toml"
    toml.write_text('[trade]\nsymbols = ["ETHUSD", "btcusd"]\n[trade.risk]\nmax_daily_loss = 0.03\n'
                    'max_orders_per_day = 40\n[trade.strategy]\nETHUSD = "maxdiff"\n[sweep]\nanything = 1\n')
    env_file = tmp_path / ".env.compile"
    env_file.write_text("export MARKETCAST_TRADE_RISK_MAX_DAILY_LOSS=0.02\nMARKETCAST_TRADE_RISK_MAX_ORDERS_PER_DAY=30\n")
    env = {"MARKETCAST_TRADE_RISK_MAX_DAILY_LOSS": "0.01", "ADD_LATEST": "7"}
    s = resolve(SPECS, "trade", config=toml, env_file=env_file, env=env, flags={"risk.max_orders_per_day": 20})
    rows = {v.key: (v.value, v.source, v.origin, v.shadowed) for v in s.rows()}
    assert rows == {
        "symbols": (("ETHUSD", "btcusd"), "marketcast.toml", f"trade.symbols in {toml}", ()),
        "risk.max_daily_loss": (0.01, "environment", "MARKETCAST_TRADE_RISK_MAX_DAILY_LOSS",
                                (f"trade.risk.max_daily_loss in {toml} = 0.03",
                                 f"MARKETCAST_TRADE_RISK_MAX_DAILY_LOSS in {env_file} = 0.02")),
        "risk.max_orders_per_day": (20, "flag", "--max-orders-per-day",
                                    (f"trade.risk.max_orders_per_day in {toml} = 40",
                                     f"MARKETCAST_TRADE_RISK_MAX_ORDERS_PER_DAY in {env_file} = 30")),
        "strategy": ({"ETHUSD": "maxdiff"}, "marketcast.toml", f"trade.strategy in {toml}", ()),
        "add_latest": (7.0, "environment", "ADD_LATEST", ()),  # an alias of the setting
    }
    assert s.files == (str(toml), str(env_file))
    nothing = resolve(SPECS, "trade", config=tmp_path / "absent.toml", env_file=tmp_path / "absent", env={})
    assert [(v.value, v.source) for v in nothing.rows()] == [(("A",), "default"), (0.05, "default"),
                                                            (100, "default"), ({}, "default"), (None, "default")]
    assert nothing.files == (f"{tmp_path / 'absent.toml'} (absent)", f"{tmp_path / 'absent'} (absent)")


@pytest.mark.parametrize("toml, env, says", [
    ("[trade.risk]\nmax_daly_loss = 0.1\n", {}, r"table trade.risk has no setting 'max_daly_loss'; known: "),
    ("[trade]\nrisk = 3\n", {}, r"table trade has no setting 'risk'"),
    ("trade = 1\n", {}, r"'trade' must be a table"),
    ("[trade\n", {}, r"not valid TOML"),
    ("[trade.risk]\nmax_daily_loss = 2.0\n", {},
     r"risk.max_daily_loss = '2' \(trade.risk.max_daily_loss in .*marketcast.toml\) is more than 1"),
    ("", {"MARKETCAST_TRADE_RISK_MAX_ORDERS_PER_DAY": "2.5"},
     r"risk.max_orders_per_day = '2.5' \(MARKETCAST_TRADE_RISK_MAX_ORDERS_PER_DAY\) is not a whole number"),
    ("", {"MARKETCAST_TRADE_STRATEGY": "ETHUSD"}, r"strategy = 'ETHUSD' \(MARKETCAST_TRADE_STRATEGY\) is 'ETHUSD' is "
                                                  r"not KEY=VALUE"),
])
def test_a_bad_value_or_an_unknown_key_is_one_error_naming_its_layer(tmp_path, toml, env, says):
    path = tmp_path / "marketcast.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=says):
        resolve(SPECS, "trade", config=path, env=env)


def test_a_shadowed_bad_value_is_shown_never_fatal(tmp_path):
    path = tmp_path / "marketcast.toml"
    path.write_text("[trade.risk]\nmax_daily_loss = 'abc'\n")
    s = resolve(SPECS, "trade", config=path, env={}, flags={"risk.max_daily_loss": 0.04})
    assert s["risk.max_daily_loss"] == 0.04 and s.values["risk.max_daily_loss"].shadowed == (
        f"trade.risk.max_daily_loss in {path} = abc",)


def test_the_trade_settings_build_the_loops_configs(tmp_path):
    path = tmp_path / "marketcast.toml"
    path.write_text('[trade]\nmodel = "toto,kronos,baseline"\ndtype = "bfloat16"\n[trade.strategy]\nethusd = '
                    '"maxdiff"\n[trade.gates]\nmin_edge = 0.002\nrequire_quote = false\n[trade.portfolio]\n'
                    'max_positions = 3\n[trade.risk]\nmax_notional_per_order = 25000\n[trade.data]\n'
                    'stale_after_s = 900\n[trade.alerts]\nwebhook = "http://127.0.0.1:9/hook"\nmax_latency_s = 0.5\n')
    s = resolve(SETTINGS, SECTION, config=path, env={})
    assert (s["model"], s["dtype"], s["strategy"]) == (("toto", "kronos", "baseline"), "bfloat16", {"ETHUSD": "maxdiff"})
    assert (cfg.gates(s).min_edge, cfg.gates(s).require_quote, cfg.gates(s).max_drawdown) == (0.002, False, 0.25)
    assert (cfg.portfolio(s).max_positions, cfg.risk(s).max_notional_per_order, cfg.risk(s).entry_cap) == (
        3, 25000.0, 25000.0)
    assert cfg.freshness(s).stale_after_s == 900.0 and cfg.thresholds(s).max_latency_s == 0.5
    assert s["alerts.webhook"] == "http://127.0.0.1:9/hook"
    for bad, says in [('model = "toto,gpt"', r"model = 'toto,gpt' .* is not one of baseline, toto, kronos"),
                      ('dtype = "float16"', "not one of float32, bfloat16"),
                      ('[trade.strategy]\nSP500 = "magic"', "not one of simple"),
                      ('[trade.alerts]\nwebhook = "ftp://x"', "not an http:// or https:// URL")]:
        path.write_text(f"[trade]\n{bad}\n")
        with pytest.raises(ConfigError, match=says):
            resolve(SETTINGS, SECTION, config=path, env={})


def test_print_config_shows_each_value_and_where_it_came_from(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MARKETCAST_TRADE_RISK_MAX_DAILY_LOSS", "0.02")
    monkeypatch.delenv("ADD_LATEST", raising=False)
    Path("marketcast.toml").write_text('[trade]\nsymbols = "ETHUSD"\n[trade.strategy]\nETHUSD = "maxdiff"\n'
                                       '[trade.risk]\nmax_daily_loss = 0.03\n')
    Path(".env.compile").write_text("export ADD_LATEST=0\n")
    s = resolve(SETTINGS, SECTION, config=Path("marketcast.toml"), env_file=Path(".env.compile"),
                env={"MARKETCAST_TRADE_RISK_MAX_DAILY_LOSS": "0.02"}, flags={"gates.min_edge": 0.002})
    rows = {r[0]: r[1:] for r in config_rows(s, "paper", live=False)}
    assert rows["mode"] == ("paper", "default", "", "")
    assert rows["symbols"] == ("ETHUSD", "marketcast.toml", "trade.symbols in marketcast.toml", "")
    assert rows["strategy"] == ("ETHUSD=maxdiff", "marketcast.toml", "trade.strategy in marketcast.toml", "")
    assert rows["risk.max_daily_loss"] == ("0.02", "environment", "MARKETCAST_TRADE_RISK_MAX_DAILY_LOSS",
                                           "trade.risk.max_daily_loss in marketcast.toml = 0.03")
    assert rows["add_latest"] == ("off", ".env.compile", "ADD_LATEST in .env.compile", "")
    assert rows["gates.min_edge"] == ("0.002", "flag", "--min-edge", "")
    assert rows["dtype"] == ("float32", "default", "", "")
    assert rows["risk.max_orders_per_cycle"] == ("20", "default", "", "")
    assert list(rows) == ["mode", *(x.key for x in SETTINGS)]  # every setting, in declaration order
    auto = resolve(SETTINGS, SECTION, env={})
    assert {r[0]: r[1] for r in config_rows(auto, "paper", False)}["add_latest"].endswith("-> off (synthetic quotes)")
    assert {r[0]: r[1] for r in config_rows(auto, "alpaca", True)}["add_latest"].endswith("-> on")
    assert config_rows(auto, "alpaca", True)[0] == ("mode", "live", "flag", "--live", "")
    # the command prints the same, from the same layers
    assert trade_main(["run", "--print-config", "--min-edge", "0.002"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "trade settings (marketcast.toml, .env.compile)" in out and "│ environment │" in out
    assert trade_main(["run", "--print-config", "--config", "nope.toml"]) == 2
    assert "--config nope.toml: no such file" in capsys.readouterr().err


def test_help_lists_every_setting_with_its_default(capsys):
    import typer

    from marketcast.commands.trade import app

    options = {p.opts[0]: p for p in typer.main.get_command(app).commands["run"].params}
    for s in SETTINGS:
        option = options[s.flag.split("/")[0].split(" ")[0]]
        if s.shown is not None:
            assert option.help.endswith(f"\\[default: {s.shown}]"), s.key  # escaped for rich
        else:
            assert (option.show_default, option.default) == (True, s.default), s.key
    assert options["--max-daily-loss"].default == 0.05 and options["--dtype"].default == "float32"
    assert trade_main(["run", "--help"]) == 0
    shown = capsys.readouterr().out
    assert "--max-daily-loss" in shown and "--strategy" in shown and "SYMBOL=NAME" in shown


def test_settings_sit_at_the_bottom_of_the_layers():
    """``marketcast.settings`` imports no marketcast module but the errors and the input-path check below it
    (every layer may use it)."""
    tree = ast.parse(Path(cfg.__file__).parents[1].joinpath("settings.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert {m for m in imported if m and m.startswith("marketcast")} == {"marketcast.errors", "marketcast.paths"}


def test_min_trades_sets_the_planners_selection_rule(tmp_path, capsys):
    """The live pick uses the backtest's SelectionRule; ``selection.min_trades`` (``--min-trades``) is its
    eligibility, 1 to the planner's 70-window lookback; 0 is one line, exit 2."""
    from marketcast.trade.loop.planner import PLANNER_CONFIG

    path = tmp_path / "marketcast.toml"
    path.write_text("[trade.selection]\nmin_trades = 25\n")
    s = resolve(SETTINGS, SECTION, config=path, env={})
    rule = cfg.selection(s, PLANNER_CONFIG.selection)
    assert (rule.lookback, rule.min_trades) == (70, 25)
    assert cfg.selection(resolve(SETTINGS, SECTION, env={}), PLANNER_CONFIG.selection) == PLANNER_CONFIG.selection
    path.write_text("[trade.selection]\nmin_trades = 71\n")
    with pytest.raises(ConfigError, match=r"selection.min_trades = '71' .* is more than 70"):
        resolve(SETTINGS, SECTION, config=path, env={})
    assert trade_main(["run", "--print-config", "--min-trades", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--min-trades" in err[0], err
