"""Light pages: Plotly is one shared file (beside the pages, or once in the output root of the run folders),
written with them; a page's own bytes stay small and a long trade list is paged in the browser."""

import os
import re
from pathlib import Path

from marketcast.report.page import bundle_name, plotly_js, write_page
from marketcast.report.tearsheet import tearsheet_html

MB = 1_000_000


def loaded_files(page_path) -> list:
    """The files a page loads: each relative ``<script src>``, beside the page."""
    text = page_path.read_text(encoding="utf-8")
    return [page_path.parent / src for src in re.findall(r'<script[^>]*\bsrc="([^"]*)"', text)]


def test_a_one_symbol_page_is_light_and_finds_its_bundle(reports, tmp_path):
    path = tmp_path / "report.html"
    write_page(path, tearsheet_html(reports[:1]))
    (bundle,) = loaded_files(path)
    assert bundle.name == bundle_name() and bundle.read_text(encoding="utf-8") == plotly_js()
    assert path.stat().st_size <= 0.5 * MB  # the page itself; the bundle is shared by every page of the folder
    assert os.path.getsize(bundle) == len(plotly_js().encode())
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([bundle.name, path.name])  # no temporary left


def test_pages_of_one_folder_share_one_bundle_written_once(reports, tmp_path):
    write_page(tmp_path / "a.html", tearsheet_html(reports[:1]))
    bundle = tmp_path / bundle_name()
    first = bundle.stat()
    write_page(tmp_path / "b.html", tearsheet_html(reports[1:]))
    again = bundle.stat()
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)  # the same bytes: not rewritten
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["a.html", "b.html", bundle_name()])


def test_pages_of_run_folders_share_one_bundle_in_their_root(reports, tmp_path):
    """Issue 57: one Plotly file per output root, each page pointing at it relatively (a sweep's grid point one
    folder deeper), however the root is then moved."""
    root = tmp_path / "out"
    pages = [root / "r1" / "report.html", root / "r2" / "fill_mode=touch" / "report.html"]
    for page in pages:
        write_page(page, tearsheet_html(reports[:1]), bundle_dir=root)
    assert [p.relative_to(root) for p in root.rglob("plotly-*")] == [Path(bundle_name())]
    assert [src for page in pages for src in re.findall(r'<script src="([^"]+)"', page.read_text())] == [
        f"../{bundle_name()}", f"../../{bundle_name()}"]
    root.rename(tmp_path / "moved")
    for page in pages:
        (found,) = loaded_files(tmp_path / "moved" / page.relative_to(root))
        assert found.resolve() == (tmp_path / "moved" / bundle_name()).resolve() and found.stat().st_size > 10**6


def test_a_damaged_bundle_is_replaced_and_modes_follow_the_page(reports, tmp_path):
    bundle = tmp_path / bundle_name()
    bundle.write_text("half a bundle")
    write_page(tmp_path / "report.html", tearsheet_html(reports[:1]), 0o600)
    assert bundle.read_text(encoding="utf-8") == plotly_js()
    assert bundle.stat().st_mode & 0o777 == 0o600 and (tmp_path / "report.html").stat().st_mode & 0o777 == 0o600


def _trade_table(page: str, symbol: str) -> str:
    return re.search(f'<table class="sortable" id="s0-{symbol}-trades"[^>]*>.*?</table>', page).group(0)


def test_a_long_trade_list_is_paged_in_the_browser(reports):
    symbol = reports[0].result.symbol
    paged = tearsheet_html(reports[:1], trades_per_page=10)
    table = _trade_table(paged, symbol)
    n = table.count("<tr>") - 1  # less the header row
    assert n > 10  # the fixture's record trades more than one page
    assert table.startswith(f'<table class="sortable" id="s0-{symbol}-trades" data-page-size="10">')
    whole = tearsheet_html(reports[:1], trades_per_page=n)
    assert whole == paged.replace(' data-page-size="10"', "")  # every row is in the page either way; one page: no pager


def test_backtest_and_report_run_page_the_trades_alike(tmp_path, monkeypatch):
    from marketcast.commands import main

    monkeypatch.setenv("MARKETCAST_RUN_STORE", str(tmp_path / "runs"))
    assert main(["backtest", "SP500", "--windows", "40", "--samples", "16", "--context", "64", "--no-spa", "--html",
                 "--output-dir", str(tmp_path / "bt"), "--trades-per-page", "10"]) == 0
    page = (tmp_path / "bt" / "latest" / "report.html").read_bytes()
    table = _trade_table(page.decode(), "SP500")
    assert table.count("<tr>") - 1 > 10 and ' data-page-size="10">' in table
    assert main(["report", "latest", "-o", str(tmp_path / "again"), "--trades-per-page", "10"]) == 0
    assert (tmp_path / "again" / "latest" / "report.html").read_bytes() == page  # the same page size: the same bytes
    assert (tmp_path / "again" / bundle_name()).read_bytes() == (tmp_path / "bt" / bundle_name()).read_bytes()
