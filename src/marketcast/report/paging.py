"""How many rows a long table shows at a time in the browser: one place for the default and the range that
``--trades-per-page`` accepts (no plotly here, so a command checks the option before drawing anything)."""

TRADES_PER_PAGE = 100
MIN_PER_PAGE, MAX_PER_PAGE = 10, 10_000
