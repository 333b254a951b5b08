"""Issue 29 item 4 in the HTML tearsheet: every table and chart that shows returns says which return it uses."""

import html
import re

from marketcast.backtest.returns import CLOSE_TO_CLOSE, SENTENCE, SKILL, STRATEGY
from marketcast.report.tearsheet import RETURNS_CAPTION


def _captions(page: str, tag: str) -> list[str]:
    return [html.unescape(c) for c in re.findall(rf"<{tag}>(.*?)</{tag}>", page, flags=re.S)]


def _notes(page: str) -> list[str]:
    return [html.unescape(c) for c in re.findall(r'<p class="note">(.*?)</p>', page, flags=re.S)]


def test_every_table_and_chart_of_returns_names_its_return(page, reports):
    n = len(reports)
    text = html.unescape(page)
    assert SENTENCE in text  # the page's subtitle
    notes = _notes(page)
    # words once: the track record and the DSR/PBO/SPA table link to the glossary, which holds each definition once
    glossary = dict(re.findall(r'<dt id="(g-[a-z-]+)">.*?</dt><dd>(.*?)</dd>', page, flags=re.S))
    assert html.unescape(glossary["g-returns"]) == SENTENCE and "predictive ability" in html.unescape(glossary["g-spa"])
    assert sum('href="#g-returns"' in note for note in notes) == n  # the track record (walk-forward and buy & hold)
    assert sum(f"returns {STRATEGY}" in note for note in notes) == 2 * n  # the in-sample and the metrics table
    assert sum(note.startswith("All ") and f"net return {STRATEGY}" in note for note in notes) == n  # trade list
    assert sum(note == f"Every column: the strategy's returns, {STRATEGY}." for note in notes) == n  # more metrics
    assert sum('href="#g-dsr"' in note and 'href="#g-spa"' in note for note in notes) == n  # DSR/PBO/SPA
    assert sum(SKILL in note for note in notes) == 1  # the skill table
    captions = _captions(page, "figcaption")
    assert sum(RETURNS_CAPTION in c for c in captions) == 2 * n  # equity and drawdown
    assert sum(c.endswith(f"Returns {STRATEGY}.") for c in captions) == 2 * n  # monthly returns, rolling Sharpe
    assert sum(f"Each trade's return: {STRATEGY}." in c for c in captions) == n  # candles with the trades
    assert sum("(prices, not returns)" in c for c in captions) == n  # fans
    assert sum(CLOSE_TO_CLOSE in c and "not a return a strategy earns" in c for c in captions) == n  # skill chart
