"""Backtest comparison: per-symbol, per-strategy return deltas against the 0.01 / 0.05 thresholds."""

from __future__ import annotations

import json

import pytest

from marketcast.commands import main
from marketcast.compile.compare import compare_files, status_for
from marketcast.errors import ConfigError


def backtest(symbol, returns, sharpe=1.0, val_loss=0.02):
    return {"symbol": symbol, "runs": 70, "generated_at": "2026-11-22T00:00:00Z",
            "strategies": {k: {"return": v, "sharpe": sharpe, "final_day": 0.0, "avg_daily_return": v / 70,
                               "annual_return": v * 3.6, "turnover": 0.4} for k, v in returns.items()},
            "metrics": {"close_val_loss": val_loss, "high_val_loss": 0.03, "low_val_loss": 0.03, "mase": 0.9},
            "best_strategy": max(returns, key=returns.get)}


@pytest.mark.parametrize("delta,status", [(0.0, "PASS"), (0.01, "PASS"), (0.0100001, "WARN"), (-0.03, "WARN"),
                                          (0.05, "WARN"), (-0.0500001, "FAIL"), (None, "WARN")])
def test_thresholds(delta, status):
    assert status_for(delta) == status


def test_compare_lists_matched_by_symbol(tmp_path):
    a = tmp_path / "eager.json"
    b = tmp_path / "compiled.json"
    a.write_text(json.dumps([backtest("ETHUSD", {"maxdiff": 0.1043, "simple": -0.0977}),
                             backtest("BTCUSD", {"maxdiff": 0.0358})]))
    b.write_text(json.dumps({"symbols": [backtest("BTCUSD", {"maxdiff": 0.0358 - 0.06}, sharpe=0.5),
                                         backtest("ETHUSD", {"maxdiff": 0.1243, "simple": -0.0977},
                                                  val_loss=0.025)]}))
    result = compare_files(a, b)
    rows = {(r["symbol"], r["strategy"]): r for r in result["rows"]}
    assert rows[("ETHUSD", "maxdiff")]["status"] == "WARN"
    assert rows[("ETHUSD", "maxdiff")]["return_delta"] == pytest.approx(0.02)
    assert rows[("ETHUSD", "simple")]["status"] == "PASS"
    assert rows[("BTCUSD", "maxdiff")]["status"] == "FAIL"
    assert rows[("BTCUSD", "maxdiff")]["sharpe_delta"] == pytest.approx(-0.5)
    assert result["metric_deltas"]["ETHUSD"]["close_val_loss"] == pytest.approx(0.005)
    assert result["status"] == "FAIL"


def test_cli_compare_exit_codes_and_bad_input(tmp_path, capsys):
    a, b, bad = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "bad.json"
    a.write_text(json.dumps(backtest("SP500", {"simple": 0.10, "buy_hold": 0.2})))
    b.write_text(json.dumps(backtest("SP500", {"simple": 0.105, "buy_hold": 0.2})))
    assert main(["compile", "compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "overall: PASS" in out and "+0.0050" in out
    b.write_text(json.dumps(backtest("SP500", {"simple": 0.20, "buy_hold": 0.2})))
    assert main(["compile", "compare", str(a), str(b), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["status"] == "FAIL"
    bad.write_text('{"symbol": "SP500", "strategies": {"simple": {"return": 0.1}')
    assert main(["compile", "compare", str(a), str(bad)]) == 2
    err = capsys.readouterr().err
    assert "not valid JSON" in err and len(err.strip().splitlines()) == 1


def test_malformed_structures_are_config_errors(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"symbol": "X", "strategies": {"s": {"sharpe": 1}}}))
    with pytest.raises(ConfigError, match="strategy 's' has no 'return'"):
        compare_files(p, p)
    q = tmp_path / "y.json"
    q.write_text(json.dumps(backtest("Y", {"s": 0.1})))
    r = tmp_path / "z.json"
    r.write_text(json.dumps(backtest("Z", {"s": 0.1})))
    with pytest.raises(ConfigError, match="no symbol in common"):
        compare_files(q, r)
