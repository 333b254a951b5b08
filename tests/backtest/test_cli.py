"""``marketcast backtest`` end to end on the embedded data and on a user CSV, via the real entry point."""

import json

import pandas as pd
import pytest

from marketcast.cli import main
from tests.conftest import make_ohlcv

FAST = ["--windows", "12", "--samples", "32", "--context", "128"]


def test_default_symbols_write_every_report(tmp_path, capsys):
    out = tmp_path / "bt"
    assert main(["backtest", *FAST, "--output-dir", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "Backtest summary for SP500 (12 windows)" in shown and "Backtest summary for NASDAQ (12 windows)" in shown
    assert sorted(p.name for p in out.iterdir()) == [
        "NASDAQ.json", "NASDAQ_equity.png", "SP500.json", "SP500_equity.png", "summary.md", "trades.csv"]
    report = json.loads((out / "SP500.json").read_text())
    assert report["symbol"] == "SP500" and report["runs"] == 12 and report["best_strategy"] in report["strategies"]
    assert set(report["strategies"]) == {"simple", "all_signals", "buy_hold", "unprofit_shutdown", "ci_guard",
                                         "entry_takeprofit", "highlow", "maxdiff"}
    for key in ("return", "sharpe", "final_day", "avg_daily_return", "annual_return", "turnover"):
        assert key in report["strategies"]["simple"]
    for key in ("close_val_loss", "high_val_loss", "low_val_loss", "mase", "crps"):
        assert report["metrics"][key] is not None
    trades = pd.read_csv(out / "trades.csv")
    assert len(trades) == 2 * 8 * 12 and set(trades.symbol) == {"SP500", "NASDAQ"}
    for name, metrics in report["strategies"].items():
        rows = trades[(trades.symbol == "SP500") & (trades.strategy == name)]
        assert (1 + rows.net_return).prod() - 1 == pytest.approx(metrics["return"], abs=1e-9)
    assert (out / "SP500_equity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "## SP500 (12 windows" in (out / "summary.md").read_text()


def test_json_flag_and_a_crypto_csv(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    make_ohlcv(80, seed=4).to_csv(data / "ETHUSD.csv")
    out = tmp_path / "out"
    code = main(["backtest", "ETHUSD", *FAST, "--data-dir", str(data), "--output-dir", str(out),
                 "--json", "--fill-mode", "penetrate", "--same-bar", "nearest"])
    assert code == 0
    reports = json.loads(capsys.readouterr().out)
    assert reports[0]["asset_class"] == "crypto" and reports[0]["annualisation"] == "sqrt(365)"
    assert reports[0]["config"]["fee_per_side"] == 0.0015 and reports[0]["config"]["fill_mode"] == "penetrate"
    trades = pd.read_csv(out / "trades.csv")
    assert (trades.side >= 0).all()  # crypto is long-only


@pytest.mark.parametrize("args, message", [
    (["--fill-mode", "cross"], "--fill-mode"),
    (["--windows", "99999"], "rows but"),
    (["NOSUCH"], "no embedded data"),
    (["--model", "prophet"], "unknown model"),
    (["--strategies", "simple,moon"], "unknown strategies"),
])
def test_bad_input_is_one_line_exit_2_and_no_output(tmp_path, capsys, args, message):
    out = tmp_path / "never"
    assert main(["backtest", *args, "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not out.exists()
