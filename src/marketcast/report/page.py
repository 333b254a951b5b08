"""One HTML page: each chart's figure as JSON beside its ``<div>``, one small script that draws them all, and
Plotly's JavaScript from one shared file (:func:`bundle_name`, written with the page by :func:`write_page`): in
the output root that holds the run folders (``out/backtest/plotly-<version>.min.js``), or beside the page.

Why a shared file: the full plotly.js bundle is 4.8 MB and the plotly wheel ships no partial bundle, so inlining it
made every page 5-7 MB, and a copy per run folder 38 MB after an hour; in the output root it is written once for
every run under it, read once by the browser and cached, and a page of one symbol is a few hundred kB. Nothing is
fetched from a network: no CDN, no web font, no image URL; the ``<script src>`` is relative
(``../plotly-<version>.min.js`` from a run folder), so the page opens the same offline (``file://``) wherever its
output root is copied. Every
text that comes from data is escaped. When all charts are drawn the script sets ``data-charts`` (how many)
and ``data-render-ms`` on ``<body>``, which the browser check (``benchmarks/html_check.py``) waits for.
Output is deterministic: the same results give the same bytes.
"""

from __future__ import annotations

import html
import json
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import plotly.graph_objects as go

from marketcast.errors import MarketcastError
from marketcast.fileio import write_atomic

PLOT_CONFIG = {"displaylogo": False, "responsive": True}

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; color: #1d1d1f;
       background: #fafafa; }
header { background: #1d1d1f; color: #fff; padding: 14px 28px; }
header h1 { margin: 0; font-size: 20px; } header p { margin: 4px 0 0; color: #c7c7cc; font-size: 13px; }
nav { position: sticky; top: 0; background: #fff; border-bottom: 1px solid #ddd; padding: 8px 28px; z-index: 9;
      font-size: 13px; } nav a { margin-right: 14px; color: #0a58ca; text-decoration: none; }
main { padding: 0 28px 40px; max-width: 1480px; }
section.symbol { margin-top: 28px; } h2 { font-size: 18px; margin: 18px 0 6px; } h3 { font-size: 15px; margin: 18px 0 6px; }
p.note, figcaption { color: #555; font-size: 12.5px; max-width: 1200px; line-height: 1.45; }
p.warning { color: #8a4b00; font-size: 13px; } p.empty { color: #777; font-style: italic; }
table { border-collapse: collapse; font-size: 13px; background: #fff; margin: 4px 0; }
th, td { padding: 4px 10px; border-bottom: 1px solid #e5e5e5; white-space: nowrap; }
th { text-align: right; background: #f2f2f2; font-weight: 600; } th:first-child, td:first-child { text-align: left; }
td { text-align: right; font-variant-numeric: tabular-nums; } tr.headline td { font-weight: 600; }
table.text td, table.text th { text-align: left; white-space: normal; }
figure.chart { background: #fff; border: 1px solid #e5e5e5; margin: 12px 0; padding: 6px 8px 2px; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 0 16px; }
p.headline { font-size: 15px; margin: 4px 0 8px; line-height: 1.5; } p.headline b { font-weight: 650; }
.hero { display: grid; grid-template-columns: minmax(0, 1fr) 340px; gap: 0 16px; align-items: start; }
.hero figure.chart { margin-top: 0; }
@media (max-width: 900px) { .hero { grid-template-columns: 1fr; } }
aside.trust { background: #fff; border: 1px solid #e5e5e5; padding: 8px 12px; font-size: 12.5px; line-height: 1.4; }
aside.trust h3 { margin: 0 0 4px; font-size: 13px; } aside.trust dl { margin: 0; }
aside.trust dt { font-weight: 600; margin-top: 5px; } aside.trust dd { margin: 0; color: #333; }
table.leaderboard tr.random td { color: #c01c28; }
div.wide { max-width: 100%; overflow-x: auto; }
details.note { color: #555; font-size: 12.5px; margin: 2px 0 4px; } details.note summary { cursor: pointer; }
.banner { background: #c01c28; color: #fff; font-weight: 650; padding: 6px 10px; margin: 0 0 6px; font-size: 13px; }
aside.trust dd.warning { color: #8a4b00; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th[aria-sort=ascending]::after { content: " ▲"; }
table.sortable th[aria-sort=descending]::after { content: " ▼"; }
div.scroll { max-height: 480px; overflow-y: auto; display: inline-block; border: 1px solid #e5e5e5; }
div.scroll thead th { position: sticky; top: 0; }
div.pager { font-size: 12.5px; margin: 4px 0; } div.pager button { font-size: 12px; }
"""

SORT = """
(function () {
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.addEventListener("click", function () {
        var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        var up = th.getAttribute("aria-sort") !== "ascending", numeric = th.hasAttribute("data-num");
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", up ? "ascending" : "descending");
        var key = function (row) {
          var cell = row.cells[col], k = cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort")
                                                                         : cell.textContent;
          if (!numeric) return k;
          k = parseFloat(k.replace(/,/g, ""));
          return isNaN(k) ? -Infinity : k;
        };
        rows = rows.map(function (row, i) { return [key(row), i, row]; });
        rows.sort(function (a, b) {
          var c = a[0] < b[0] ? -1 : (a[0] > b[0] ? 1 : a[1] - b[1]);
          return up || a[0] === b[0] ? c : -c;
        });
        var done = document.createDocumentFragment();
        rows.forEach(function (row) { done.appendChild(row[2]); });
        body.appendChild(done);
        table.dispatchEvent(new Event("sorted"));
      });
    });
  });
})();
"""

PAGER = """
(function () {
  document.querySelectorAll("table[data-page-size]").forEach(function (table) {
    var size = Number(table.getAttribute("data-page-size")), page = 0, bar = document.createElement("div");
    var prev = document.createElement("button"), next = document.createElement("button");
    var label = document.createElement("span"), box = table.closest("div.scroll") || table;
    bar.className = "pager"; prev.textContent = "\u2039 previous"; next.textContent = "next \u203a";
    bar.append(prev, label, next);
    box.parentNode.insertBefore(bar, box);
    var show = function () {
      var rows = table.tBodies[0].rows, n = rows.length, pages = Math.max(1, Math.ceil(n / size));
      page = Math.min(Math.max(page, 0), pages - 1);
      for (var i = 0; i < n; i++) rows[i].hidden = Math.floor(i / size) !== page;
      label.textContent = " rows " + (page * size + 1) + "-" + Math.min(n, (page + 1) * size) + " of " + n + " ";
      prev.disabled = page === 0; next.disabled = page === pages - 1;
    };
    prev.addEventListener("click", function () { page -= 1; show(); });
    next.addEventListener("click", function () { page += 1; show(); });
    table.addEventListener("sorted", function () { page = 0; show(); });
    show();
  });
})();
"""

RENDER = """
(function () {
  var started = performance.now(), blocks = document.querySelectorAll("script[data-chart]"), jobs = [];
  var config = %s;
  blocks.forEach(function (block) {
    var fig = JSON.parse(block.textContent);
    jobs.push(Plotly.newPlot(block.getAttribute("data-chart"), fig.data, fig.layout, config));
  });
  Promise.all(jobs).then(function () {
    document.body.setAttribute("data-render-ms", String(Math.round(performance.now() - started)));
    document.body.setAttribute("data-charts", String(jobs.length));
  });
})();
"""


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """The plotly.js bundle that ships with the installed plotly package (offline, version-matched)."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


@lru_cache(maxsize=1)
def bundle_name() -> str:
    """The shared bundle's file name, with plotly.js's version in it: a folder holding pages of two plotly
    versions keeps both bundles, and a page never loads a bundle it was not drawn for."""
    from plotly.offline import get_plotlyjs_version

    return f"plotly-{get_plotlyjs_version()}.min.js"


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def anchor(text: str) -> str:
    """An id for ``text`` that is safe in HTML and CSS (symbols like ``BTC/USD`` or ``ES=F``)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_") or "x"


def chart(chart_id: str, fig: go.Figure, caption: str = "") -> str:
    """A chart: its ``<div>``, its figure as JSON (``<`` escaped, so no text in it can end the script) and a
    caption."""
    data = fig.to_json().replace("<", "\\u003c")
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return (f'<figure class="chart"><div id="{esc(chart_id)}" class="plot"></div>'
            f'<script type="application/json" data-chart="{esc(chart_id)}">{data}</script>{cap}</figure>')


def table(columns: Sequence[str], rows: Sequence[Sequence], headline: int = 0, caption: str = "",
          text: bool = False) -> str:
    """An HTML table of numbers (right-aligned; ``text``: left-aligned); the first ``headline`` rows in bold."""
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = "".join(f'<tr{" class=headline" if i < headline else ""}>' + "".join(f"<td>{esc(v)}</td>" for v in row)
                   + "</tr>" for i, row in enumerate(rows))
    note = f'<p class="note">{esc(caption)}</p>' if caption else ""
    return f"<table{' class=text' if text else ''}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}"


def sortable_table(columns: Sequence[tuple[str, bool]], rows: Sequence[Sequence], table_id: str,
                   caption: str = "", scroll: bool = False, page_size: int = 0) -> str:
    """A table the reader sorts by clicking a header (plain inline script, :data:`SORT`; a second click
    reverses, ties keep their order). ``columns``: (header, numeric). A cell is its text, which is also its sort
    key (numeric columns: the leading number, thousands commas ignored, anything else last), or (text, key)
    where the text does not sort right. Rows keep the given order until a click. ``scroll``: a box of its own
    height (long lists). Cells carry a key only where needed: a trade list of thousands of rows stays small.
    ``page_size``: more rows than this are shown that many at a time (:data:`PAGER`: previous/next, a sort goes
    back to the first page); 0 shows them all."""
    def cell(value) -> str:
        if isinstance(value, tuple):
            return f'<td data-sort="{esc(value[1])}">{esc(value[0])}</td>'
        return f"<td>{esc(value)}</td>"

    head = "".join(f"<th{' data-num' if numeric else ''}>{esc(c)}</th>" for c, numeric in columns)
    body = "".join("<tr>" + "".join(cell(v) for v in row) + "</tr>" for row in rows)
    note = f'<p class="note">{esc(caption)}</p>' if caption else ""
    paged = f' data-page-size="{page_size}"' if 0 < page_size < len(rows) else ""
    grid = f'<table class="sortable" id="{esc(table_id)}"{paged}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    return (f'<div class="scroll">{grid}</div>' if scroll else grid) + note


def heading(anchor_id: str, text: str) -> str:
    return f'<h2 id="{esc(anchor_id)}">{esc(text)}</h2>'


def paragraph(text: str, kind: str = "note") -> str:
    return f'<p class="{kind}">{esc(text)}</p>'


def document(title: str, subtitle: str, nav: Sequence[tuple[str, str]], body: str) -> str:
    """The whole page: ``nav`` is (anchor id, label) pairs; ``body`` is trusted HTML built by this module."""
    links = "".join(f'<a href="#{esc(a)}">{esc(label)}</a>' for a, label in nav)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{esc(title)}</title>"
            f"<style>{STYLE}</style>{_script(bundle_name())}</head><body>"
            f"<header><h1>{esc(title)}</h1><p>{esc(subtitle)}</p></header>"
            f"{'<nav>' + links + '</nav>' if links else ''}<main>{body}</main>"
            f"<script>{SORT}{PAGER}{RENDER % json.dumps(PLOT_CONFIG)}</script></body></html>\n")


def _script(src: str) -> str:
    return f'<script src="{esc(src)}"></script>'


def write_page(path: str | Path, text: str, mode: int | None = None, bundle_dir: str | Path | None = None) -> None:
    """Write the page atomically (a reader sees the old page or the new one, never half of one), the shared
    Plotly bundle first (:func:`write_bundle`), so a page on disk always finds it; ``mode``: their permission
    bits from the first byte (``trade status``'s page is its owner's alone). ``bundle_dir``: where the bundle
    goes (default: beside the page), an output root that holds run folders: one file for all their pages, which
    reference it by a relative path (``../plotly-<version>.min.js``)."""
    final = Path(path)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MarketcastError(f"{final.parent}: cannot create the folder ({exc.strerror})") from None
    if final.is_dir():
        raise MarketcastError(f"{final}: is a folder; give the HTML file's path")
    bundle = write_bundle(Path(bundle_dir) if bundle_dir is not None else final.parent, mode)
    text = text.replace(_script(bundle_name()), _script(os.path.relpath(bundle, final.parent)), 1)
    write_atomic(final, lambda tmp: tmp.write_text(text, encoding="utf-8"), MarketcastError, mode)


def write_bundle(folder: Path, mode: int | None = None) -> Path:
    """The shared plotly.js beside the pages of ``folder``, written atomically unless the same bytes are there
    (pages re-made into one folder rewrite nothing, and a reader never sees half a bundle)."""
    bundle = folder / bundle_name()
    body = plotly_js().encode("utf-8")
    try:
        if bundle.is_file() and bundle.stat().st_size == len(body) and bundle.read_bytes() == body:
            return bundle
    except OSError:
        pass  # unreadable: written over below, or the write names the problem
    return write_atomic(bundle, body, MarketcastError, mode)
