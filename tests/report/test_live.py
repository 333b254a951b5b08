"""The live status page from a real paper replay's state folder: records, journal and alerts as shown."""

import json
import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from marketcast.commands import main
from marketcast.data import load_symbol
from marketcast.forecast import load_forecaster
from marketcast.report.live import (
    PAGE_NAME, count_axis, date_axis, is_open, read_alerts, read_state, status_html,
)
from marketcast.trade.loop.cycle import LoopConfig
from marketcast.trade.risk.gates import GateConfig
from marketcast.trade.ops.monitor import read_records
from marketcast.trade.loop.planner import BacktestPlanner
from marketcast.trade.replay import replay
from marketcast.trade.journal.state import Intent, Journal
from tests.report.pagedata import figures, trace

SYMS = ("SP500", "NASDAQ")
OPEN_GATES = GateConfig(min_edge=-1.0, min_sharpe=-1e9, max_drawdown=1.01)
ALERTS = [{"at": "2017-07-13T00:00:05Z", "level": "warning", "kind": "latency", "message": "forecast 1.2 s",
           "model": "baseline"},
          {"at": "2017-07-14T00:00:05Z", "level": "critical", "kind": "halt", "message": "daily loss 3 %"}]
OPEN = Intent("mc-open-1", "2017-07-13T00:00:00+00:00", "maxdiff", "SP500", "buy", 3.0, "limit", 2440.5, 2460.25,
              "day", status="submitted", broker_order_id="b-1", broker_status="new")


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trade")
    replay({s: load_symbol(s) for s in SYMS}, BacktestPlanner(load_forecaster("baseline")), folder,
           "2017-06-01", "2017-07-15", LoopConfig(SYMS, gates=OPEN_GATES, exit="close"))  # the planner's rule
    journal = Journal(folder / "journal.db")
    journal.record_intent(OPEN)
    journal.close()
    (folder / "alerts.jsonl").write_text("".join(json.dumps(a) + "\n" for a in ALERTS) + '{"torn')
    return folder


@pytest.fixture(scope="module")
def page(state_dir):
    return status_html(read_state(state_dir))


def _section(page: str, anchor: str) -> str:
    return page.split(f'<h2 id="{anchor}">')[1].split("<h2 ")[0]


def test_open_means_sent_and_not_known_finished():
    assert is_open("submitted", "new") and is_open("submitted", "partially_filled") and is_open("pending", None)
    assert is_open("submitted", "held")
    assert not is_open("submitted", "filled") and not is_open("rejected", None) and not is_open("submitted", "expired")


def test_equity_and_health_charts_are_the_records(page, state_dir):
    records = read_records(state_dir)
    figs = figures(page)
    assert list(figs) == ["live-equity", "live-health"]
    np.testing.assert_allclose(trace(figs["live-equity"], "equity")["y"], [r["equity"] for r in records])
    latency = trace(figs["live-health"], "baseline latency")["y"]
    np.testing.assert_allclose(latency, [1000 * r["forecast_latency_s"]["baseline"] for r in records])
    assert trace(figs["live-health"], "recompiles since start")["y"].tolist() == [0] * len(records)
    first, last = records[0]["equity"], records[-1]["equity"]
    assert f"{first:,.2f} → {last:,.2f} ({last / first - 1:+.2%})" in page


def test_the_charts_axes_read_as_dates_and_whole_counts(page, state_dir):
    records = read_records(state_dir)
    figs = figures(page)
    times = pd.DatetimeIndex(pd.to_datetime([r["decision_ts"] for r in records], utc=True))
    for name in ("live-equity", "live-health"):
        layout = figs[name]["layout"]
        assert layout["xaxis"]["type"] == "date" and layout["xaxis"]["title"]["text"] == "decision bar (UTC)"
        assert layout["xaxis"]["tickformat"] == "%Y-%m-%d"  # six weeks of cycles: dates, not bare numbers
        x = figs[name]["data"][0]["x"]
        np.testing.assert_array_equal(x, times.tz_localize(None).asi8 / 1e6)  # ms since the epoch, UTC
    y2 = figs["live-health"]["layout"]["yaxis2"]
    assert y2["dtick"] == 1 and y2["tick0"] == 0 and y2["tickmode"] == "linear"  # no ticks at 0.2 read "0"
    assert count_axis(23)["dtick"] == 5 and count_axis(0.5)["dtick"] == 1
    short = date_axis(go.Figure(), pd.DatetimeIndex(["2024-01-02 14:00", "2024-01-02 20:00"]))
    assert short.layout.xaxis.tickformat == "%Y-%m-%d %H:%M"  # one day's cycles: with the time of day


def test_open_orders_fills_and_alerts_come_from_the_journal_and_alerts_file(page, state_dir):
    orders = _section(page, "orders")
    assert "mc-open-1" in orders and "2,440.50" in orders and "2,460.25" in orders and orders.count("<tr>") == 2
    journal = Journal(state_dir / "journal.db")
    fills = journal.fills()
    journal.close()
    rows = [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", _section(page, "fills"))]
    assert len(fills) > 25 and len(rows) == 1 + 25  # the header, then the last 25, newest first
    assert [(r[0], r[1], r[4], r[6]) for r in rows[1:]] == [
        (f.timestamp, f.symbol, f"{f.price:,.2f}", f.kind) for f in fills[::-1][:25]]
    alerts = _section(page, "alerts")
    assert alerts.index("daily loss 3 %") < alerts.index("forecast 1.2 s")  # newest first
    assert "{&quot;model&quot;: &quot;baseline&quot;}" in alerts and "torn" not in alerts
    assert read_alerts(state_dir) == ALERTS


def test_the_fills_costs_say_fee_spread_and_slippage_together_with_the_defaults_apart(page, state_dir):
    """A paper fill's journalled fee is every cost of that side: for these stock entries 5 bp fee + 1 bp
    half-spread + 1 bp slippage = 7 bp of the notional, so the column is named for all three and the split is
    given beside it (terminal and page alike)."""
    from marketcast.trade.ops.status import COSTS_COLUMN, status_rows

    journal = Journal(state_dir / "journal.db")
    entries = [f for f in journal.fills() if f.kind == "entry"]
    journal.close()
    assert len(entries) > 5
    for f in entries:  # hand-computed: (5 + 1 + 1) bp of qty x price
        assert f.fee == pytest.approx(f.qty * f.price * 7e-4, rel=1e-12)
    fills = _section(page, "fills")
    stock = "stock: fee 5 + half-spread 1 + slippage 1 = 7 bp per side"
    assert f"<th>{COSTS_COLUMN}</th>" in fills and "<th>fee</th>" not in fills and stock in page
    assert stock in dict(status_rows(state_dir))[COSTS_COLUMN]


def test_an_empty_state_folder_says_so(tmp_path):
    page = status_html(read_state(tmp_path))
    assert figures(page) == {}
    for text in ("no positions at the last cycle", "no journal.db in the state folder", "no fills yet", "no alerts"):
        assert text in page


def test_trade_status_html_writes_the_page_or_one_error_line(state_dir, tmp_path, capsys):
    assert main(["trade", "status", "--state-dir", str(state_dir), "--html"]) == 0
    assert f"status page: {state_dir / PAGE_NAME}" in capsys.readouterr().out
    assert figures((state_dir / PAGE_NAME).read_text()).keys() == {"live-equity", "live-health"}
    assert main(["trade", "status", "--state-dir", str(tmp_path / "nope"), "--html"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "no such state dir" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "nope").exists()


def test_the_status_page_is_light_and_its_bundle_lies_beside_it(state_dir, capsys):
    from marketcast.report.page import bundle_name, plotly_js

    assert main(["trade", "status", "--state-dir", str(state_dir), "--html"]) == 0
    page = (state_dir / PAGE_NAME)
    assert page.stat().st_size <= 200_000  # two charts and four tables; Plotly is the shared file, not inlined
    assert f'<script src="{bundle_name()}"></script>' in page.read_text()
    bundle = state_dir / bundle_name()
    assert bundle.read_text(encoding="utf-8") == plotly_js() and bundle.stat().st_mode & 0o777 == 0o600
