"""Browser check of marketcast's HTML pages in headless Chromium, with the network switched off.

For each page: load it from disk in a fresh headless Chromium (Debian's ``chromium`` package, or the npm
registry's ``@sparticuz/chromium`` unpacked as docs/reports.md#getting-a-headless-chromium says) with the
network emulated offline, wait until the page says every chart is drawn (``<body data-charts>``), then

* fail on any console error, uncaught exception or error log entry;
* fail on any request that is not ``file:`` or ``data:`` (the page must not fetch anything);
* fail unless every chart has traces, every trace has points and the SVG holds its drawn traces, and
  every table has rows;
* on every page (a tearsheet, a ``models compare`` page, the live status page), MEASURE where things are in a
  1280 x 900 viewport: fail unless the verdict strip (``id="verdict"``), the headline line and the equity chart
  lie within the first 900 px;
* on a tearsheet, fail unless every symbol has its drawdown-periods table and its trade list; then click the
  trade list's "net return" header twice and fail unless the rows come out sorted up, then down;
* save a full-page screenshot PNG, and report the page size (the page's own bytes, and apart the files it
  loads: the shared Plotly bundle beside it; fail when the page's own bytes pass issue 46's limits,
  :func:`size_limit`) and the render time (navigation to the last chart drawn, wall clock, and Plotly's own
  drawing time measured in the page).

Pages are given as paths, or built first with ``--windows N`` (``marketcast backtest --windows N --html`` on
the embedded default, run store off; its seconds are reported too), ``--status`` (six weeks of ``trade replay``
on SP500 and NASDAQ, gates open, then ``trade status --html``: the live status page) and ``--leaderboard``
(``models compare`` of the baseline and a random-weights toto2 on SP500, then ``report RUN``: a one-symbol page
opening with a strip row per model). It talks to Chromium over the DevTools protocol (``websockets``), so it
needs no browser driver package. Not run in CI (no Chromium there).

    PYTHONPATH=src python benchmarks/html_check.py [PAGE.html ...] [--windows 70 5000] [--status] [--leaderboard]
        [--out DIR]
        [--chromium PATH (default $MARKETCAST_CHROMIUM, else chromium on the PATH)] [--timeout 120]

Exit status 1 when a check fails. Results: ``benchmarks/results/html_check.json`` and two PNGs per page (the
whole page, and its first screen as ``*_fold.png``).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import RowReport
from rich.console import Console
from rich.table import Table
from websockets.sync.client import connect

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--hide-scrollbars", "--remote-debugging-port=0")
WIDTH, HEIGHT = 1280, 900  # the viewport: the first HEIGHT px are "above the fold"
FOLD = HEIGHT

INSPECT = """JSON.stringify({
  charts: Array.from(document.querySelectorAll("div.plot")).map(function (gd) {
    return {id: gd.id, drawn: gd.querySelectorAll("g.trace, g.hm, g.imagelayer image").length,
            title: (gd.layout && gd.layout.title && gd.layout.title.text) || "",
            traces: (gd._fullData || []).map(function (t) {
              var n = t._length;
              if (n == null) n = t.z ? t.z.length : (t.x ? t.x.length : 0);
              return {type: t.type, name: t.name, points: n};
            })};
  }),
  tables: Array.from(document.querySelectorAll("table")).map(function (t) {
    return t.tBodies.length ? t.tBodies[0].rows.length : 0;
  }),
  renderMs: Number(document.body.getAttribute("data-render-ms")),
  height: document.documentElement.scrollHeight,
  fold: (function () {
    function box(selector) {
      var e = document.querySelector(selector);
      if (!e) return null;
      var b = e.getBoundingClientRect();
      return {top: Math.round(b.top + window.scrollY), bottom: Math.round(b.bottom + window.scrollY),
              left: Math.round(b.left), right: Math.round(b.right)};
    }
    return {headline: box("[data-check=headline]"), equity: box(".hero div.plot"), trust: box("[data-check=trust]"),
            verdict: box("#verdict"),
            viewport: [window.innerWidth, window.innerHeight]};
  })(),
  sections: Array.from(document.querySelectorAll("section.symbol")).map(function (s) {
    function rows(suffix) {
      var e = document.getElementById(s.id + suffix);
      if (!e) return null;
      return e.tagName === "TABLE" ? e.tBodies[0].rows.length : 0;
    }
    return {id: s.id, trades: rows("-trades"), drawdowns: rows("-drawdowns")};
  })
})"""

SORT_CHECK = """(function () {
  var t = document.querySelector("table.sortable[id$='-trades']");
  if (!t) return JSON.stringify(null);
  var heads = Array.from(t.tHead.rows[0].cells), col = heads.findIndex(function (h) {
    return h.textContent.indexOf("net return") === 0; });
  function keys() {
    return Array.from(t.tBodies[0].rows).map(function (r) { return Number(r.cells[col].getAttribute("data-sort")); });
  }
  function sorted(k, up) {
    for (var i = 1; i < k.length; i++) { if (up ? k[i] < k[i - 1] : k[i] > k[i - 1]) return false; }
    return true;
  }
  heads[col].click();
  var up = keys();
  heads[col].click();
  var down = keys();
  heads[0].click();
  return JSON.stringify({rows: up.length, up: sorted(up, true), down: sorted(down, false),
                         first: up[0], last: up[up.length - 1]});
})()"""


class DevTools:
    """A minimal DevTools-protocol client over one browser websocket (flattened target sessions)."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 60.0):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.ws.send(json.dumps(message))
        deadline = time.monotonic() + timeout
        while True:
            reply = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)


def launch(chromium: str, profile: Path) -> tuple[subprocess.Popen, str]:
    """Start Chromium with a fresh profile; returns the process and its browser websocket URL."""
    proc = subprocess.Popen([chromium, *FLAGS, f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}",
                             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if port_file.exists():
            lines = port_file.read_text().split()
            if len(lines) >= 2:
                return proc, f"ws://127.0.0.1:{lines[0]}{lines[1]}"
        if proc.poll() is not None:
            raise RuntimeError(f"{chromium} exited with {proc.returncode} before it listened")
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{chromium} did not open its DevTools port within 60 s")


def problems_in(events: list[dict]) -> list[str]:
    """Console errors, exceptions, error log entries and non-local requests among the page's events."""
    out = []
    for e in events:
        method, p = e["method"], e.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console error: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"]))
        elif method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            out.append(f"exception: {d.get('exception', {}).get('description') or d.get('text')}")
        elif method == "Log.entryAdded" and p["entry"]["level"] == "error":
            out.append(f"log error: {p['entry']['text']} {p['entry'].get('url', '')}")
        elif method == "Network.requestWillBeSent":
            url = p["request"]["url"]
            if not url.startswith(("file:", "data:", "about:")):
                out.append(f"network request: {url}")
    return out


def chart_problems(found: dict) -> list[str]:
    out = [] if found["charts"] else ["no charts on the page"]
    for c in found["charts"]:
        if not c["traces"]:
            out.append(f"chart {c['id']}: no traces")
        out += [f"chart {c['id']}: trace {t['name']!r} ({t['type']}) has no points" for t in c["traces"]
                if not t["points"]]
        if c["drawn"] < 1:
            out.append(f"chart {c['id']}: nothing drawn in its SVG")
    out += [f"table {i}: no rows" for i, rows in enumerate(found["tables"]) if rows == 0]
    return out


def verdict_problems(found: dict) -> list[str]:
    """On every page: the verdict strip (``id="verdict"``) within the first screen."""
    box = found["fold"]["verdict"]
    if box is None:
        return ['no verdict strip (id="verdict") on the page']
    return [f"verdict ends at {box['bottom']} px, below the first {FOLD} px"] if box["bottom"] > FOLD else []


def loaded_files(page: Path) -> list[Path]:
    """The files the page loads (its relative ``<script src>``: the shared Plotly bundle beside it or in the output root)."""
    text = page.read_text(encoding="utf-8")
    return [page.parent / src for src in re.findall(r'<script[^>]*\bsrc="([^":]*)"', text)]


def fold_problems(found: dict, sort: dict | None) -> list[str]:
    """On every page (a tearsheet, a leaderboard page, the live status page): its headline line and its equity
    chart above the fold. On a tearsheet also each symbol's drawdown table and trade list present, the trade
    list sortable."""
    fold = found["fold"]
    out = []
    for name in ("headline", "equity"):
        box = fold[name]
        if box is None:
            out.append(f"no {name} on the page")
        elif box["bottom"] > FOLD:
            out.append(f"{name} ends at {box['bottom']} px, below the first {FOLD} px")
    for s in found["sections"]:
        out += [f"{s['id']}: no {what}" for what, key in (("trade list", "trades"), ("drawdown table", "drawdowns"))
                if s[key] is None]
    if sort is None:
        if any(s["trades"] for s in found["sections"]):
            out.append("the trade list is not a sortable table")
    elif not (sort["up"] and sort["down"]):
        out.append(f"clicking the trade list's net return header did not sort it ({sort})")
    return out


MB = 1_000_000
STATUS_LIMIT, SYMBOL_LIMIT, LONG_LIMIT, LONG_WINDOWS = 1.0 * MB, 1.5 * MB, 3.0 * MB, 5000


def size_limit(page: Path, symbols: int, windows: int | None) -> float:
    """Issue 46's limits on a page's own bytes (the shared Plotly file beside it is counted apart): the status
    page 1 MB, a 5,000-window page 3 MB, any other tearsheet 1.5 MB a symbol."""
    if page.name == "status.html":
        return STATUS_LIMIT
    return LONG_LIMIT if (windows or 0) >= LONG_WINDOWS else SYMBOL_LIMIT * max(1, symbols)


def check_page(chromium: str, page: Path, screenshot: Path, timeout: float) -> dict:
    """Load ``page`` offline, wait for its charts, inspect and screenshot it."""
    profile = Path(tempfile.mkdtemp(prefix="marketcast-chromium-"))
    proc, url = launch(chromium, profile)
    try:
        with connect(url, max_size=None, open_timeout=30) as ws:
            found, rendered, problems = _inspect(DevTools(ws), page, screenshot, timeout)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)
    loads = loaded_files(page)
    shared = sum(p.stat().st_size for p in loads if p.is_file())
    return {"page": str(page), "bytes": page.stat().st_size, "loads": [str(p) for p in loads],
            "shared_bytes": shared, "bytes_with_loaded": page.stat().st_size + shared,
            "render_s": rendered, "plotly_ms": found["renderMs"],
            "charts": len(found["charts"]), "traces": sum(len(c["traces"]) for c in found["charts"]),
            "points": sum(t["points"] for c in found["charts"] for t in c["traces"]),
            "tables": len(found["tables"]), "page_height_px": found["height"], "screenshot": str(screenshot),
            "chart_titles": [c["title"] for c in found["charts"]], "fold": found["fold"],
            "sections": found["sections"], "sort": found["sort"], "problems": problems}


def _inspect(dt: DevTools, page: Path, screenshot: Path, timeout: float) -> tuple[dict, float | None, list[str]]:
    """Navigate, wait for the charts, read what the page drew, screenshot it; the problems found."""
    target = dt.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = dt.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        dt.call(f"{domain}.enable", session=session)
    dt.call("Network.emulateNetworkConditions", {"offline": True, "latency": 0, "downloadThroughput": -1,
                                                 "uploadThroughput": -1}, session)
    dt.call("Emulation.setDeviceMetricsOverride", {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1,
                                                   "mobile": False}, session)
    started = time.perf_counter()
    dt.call("Page.navigate", {"url": page.resolve().as_uri()}, session)
    rendered = None
    while time.perf_counter() - started < timeout:
        value = dt.call("Runtime.evaluate", {"expression": "document.body && document.body.getAttribute('data-charts')",
                                             "returnByValue": True}, session)["result"].get("value")
        if value is not None:
            rendered = time.perf_counter() - started
            break
        time.sleep(0.05)
    found = json.loads(dt.call("Runtime.evaluate", {"expression": INSPECT, "returnByValue": True},
                               session)["result"]["value"])
    found["sort"] = json.loads(dt.call("Runtime.evaluate", {"expression": SORT_CHECK, "returnByValue": True},
                                       session)["result"]["value"])
    time.sleep(0.3)  # late console messages arrive with the next reply
    dt.call("Runtime.evaluate", {"expression": "1"}, session)
    shot = dt.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                              "clip": {"x": 0, "y": 0, "width": WIDTH, "height": found["height"],
                                                       "scale": 1}}, session, timeout=120)
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    screenshot.write_bytes(base64.b64decode(shot["data"]))
    fold = dt.call("Page.captureScreenshot", {"format": "png", "clip": {"x": 0, "y": 0, "width": WIDTH,
                                                                         "height": FOLD, "scale": 1}}, session)
    # what a reader sees first
    screenshot.with_name(f"{screenshot.stem}_fold.png").write_bytes(base64.b64decode(fold["data"]))
    problems = (problems_in(dt.events) + chart_problems(found) + verdict_problems(found)
                + fold_problems(found, found["sort"]))
    if rendered is None:
        problems.insert(0, f"charts not drawn within {timeout:g} s")
    return found, rendered, problems


def build_page(windows: int, folder: Path) -> tuple[Path, float]:
    """``marketcast backtest --windows N --html`` on the embedded default; the page and its seconds."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MARKETCAST_RUN_STORE": "off"}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "marketcast.commands", "backtest", "--windows", str(windows), "--html",
                    "--output-dir", str(folder)], env=env, check=True, stdout=subprocess.DEVNULL)
    return folder / "latest" / "report.html", time.perf_counter() - started


def _run(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "marketcast.commands", *args], env=env, check=True,
                          capture_output=True, text=True)


#: The entry gates opened (every non-flat signal goes through), so the replay trades and the status page has
#: fills, positions and an equity curve that moves.
OPEN_GATES = {"MARKETCAST_TRADE_GATES_MIN_EDGE": "-1", "MARKETCAST_TRADE_GATES_MIN_SHARPE": "-1000000000",
              "MARKETCAST_TRADE_GATES_MAX_DRAWDOWN": "1.01"}


def build_status_page(folder: Path) -> tuple[Path, float]:
    """Six weeks of ``trade replay`` on SP500 and NASDAQ with the gates open, then ``trade status --html``: the
    live status page and its seconds."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MARKETCAST_RUN_STORE": "off", **OPEN_GATES}
    started = time.perf_counter()
    _run(["trade", "replay", "--from", "2017-06-01", "--to", "2017-07-15", "--symbols", "SP500,NASDAQ",
          "--state-dir", str(folder)], env)
    _run(["trade", "status", "--state-dir", str(folder), "--html"], env)
    return folder / "status.html", time.perf_counter() - started


def build_leaderboard_page(folder: Path) -> tuple[Path, float]:
    """``models compare`` (the baseline and a random-weights toto2 on SP500), then ``report RUN``: the first
    model's page, which opens with the leaderboard; its seconds."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MARKETCAST_RUN_STORE": str(folder / "runs")}
    started = time.perf_counter()
    doc = json.loads(_run(["models", "compare", "--symbols", "SP500", "--models", "baseline,toto2", "--weights",
                           "toto2=random:4m", "--windows", "70", "--samples", "32", "--context", "64", "--json"],
                          env).stdout)
    _run(["report", doc["run_id"], "-o", str(folder / "report")], env)
    return min((folder / "report").rglob("report.html")), time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="*", type=Path)
    parser.add_argument("--windows", type=int, nargs="*", default=[], help="build a backtest page per value")
    parser.add_argument("--status", action="store_true", help="build and check the live status page")
    parser.add_argument("--leaderboard", action="store_true", help="build and check a models-compare page")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--chromium", default=os.environ.get("MARKETCAST_CHROMIUM") or shutil.which("chromium")
                        or "/usr/bin/chromium", help="the browser (default: $MARKETCAST_CHROMIUM, else chromium on "
                                                     "the PATH); docs/reports.md#getting-a-headless-chromium")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    if not Path(args.chromium).exists():
        print(f"error: no Chromium at {args.chromium}; install it (apt-get install -y chromium, or as "
              "docs/reports.md#getting-a-headless-chromium says) and pass --chromium or set MARKETCAST_CHROMIUM",
              file=sys.stderr)
        return 2
    jobs = [(p, None, None) for p in args.pages]
    work = Path(tempfile.mkdtemp(prefix="marketcast-html-check-"))
    for n in args.windows:
        page, seconds = build_page(n, work / f"w{n}")
        jobs.append((page, n, seconds))
    for wanted, build, name in ((args.status, build_status_page, "status"),
                                (args.leaderboard, build_leaderboard_page, "leaderboard")):
        if wanted:
            page, seconds = build(work / name)
            jobs.append((page, None, seconds))
    if not jobs:
        parser.error("give pages, --windows, --status or --leaderboard")
    console = Console(width=260)
    report = RowReport(str((args.out / "html_check.json").resolve()), list(COLUMNS),
                       {"chromium": chromium_version(args.chromium), "viewport": [WIDTH, HEIGHT],
                        "host": platform.node()}, console)
    for page, windows, seconds in jobs:
        name = f"backtest_{windows}w" if windows else f"{page.parent.name}_{page.stem}"
        row = check_page(args.chromium, page, args.out / "html_check" / f"{name}.png", args.timeout)
        row["limit_bytes"] = size_limit(page, len(row["sections"]), windows)
        if row["bytes"] > row["limit_bytes"]:
            row["problems"].append(f"the page is {row['bytes'] / MB:.2f} MB, over its {row['limit_bytes'] / MB:g} MB")
        row.update(name=name, windows=windows, build_s=seconds,
                   console_errors=sum(x.startswith(CONSOLE) for x in row["problems"]))
        report.add(row, cells(row))
    shutil.rmtree(work, ignore_errors=True)
    rows = report.rows
    table = Table(title=f"HTML check in headless Chromium, offline ({platform.node()}, {os.cpu_count()} CPUs)")
    for col in COLUMNS:
        table.add_column(col, justify="left" if col in ("page", "problems") else "right")
    for r in rows:
        table.add_row(*cells(r))
    console.print(table)
    report.finish()
    for r in rows:
        print(f"screenshot: {r['screenshot']}")
    return 1 if any(r["problems"] for r in rows) else 0


COLUMNS = ("page", "windows", "build s", "page MB", "limit MB", "shared MB", "render s", "plotly ms", "charts",
           "traces", "points", "verdict px", "headline px", "equity px", "trades", "drawdowns", "sorts",
           "console errors", "problems")
CONSOLE = ("console error", "exception", "log error")  # how problems_in names what the page itself reported


def cells(r: dict) -> list[str]:
    """One checked page as the texts of :data:`COLUMNS`."""
    return [r["name"], str(r["windows"] or ""), f"{r['build_s']:.1f}" if r["build_s"] else "",
            f"{r['bytes'] / MB:.3f}", f"{r['limit_bytes'] / MB:g}", f"{r['shared_bytes'] / MB:.2f}",
            "-" if r["render_s"] is None else f"{r['render_s']:.2f}", f"{r['plotly_ms']:.0f}", str(r["charts"]),
            str(r["traces"]), f"{r['points']:,}", _span(r["fold"]["verdict"]), _span(r["fold"]["headline"]),
            _span(r["fold"]["equity"]),
            "/".join("-" if s["trades"] is None else str(s["trades"]) for s in r["sections"]),
            "/".join("-" if s["drawdowns"] is None else str(s["drawdowns"]) for s in r["sections"]),
            "-" if r["sort"] is None else ("yes" if r["sort"]["up"] and r["sort"]["down"] else "NO"),
            str(r["console_errors"]), "; ".join(r["problems"]) or "none"]


def _span(box: dict | None) -> str:
    """Where an element lies, top-bottom in page pixels ('-' when absent)."""
    return "-" if box is None else f"{box['top']}-{box['bottom']}"


def chromium_version(chromium: str) -> str:
    done = subprocess.run([chromium, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
